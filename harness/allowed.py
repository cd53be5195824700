"""The third-party packages each assignment allows a student to import (besides torch and the standard
library). A module the grader lacks but the assignment allows is the grader's environment, never the
student's fault: the check reports it as a grader fault with the command that installs it
(`missing_module_fault`), and `mtxdiag gradescope build` installs them in the autograder.

The lm list follows what CS336 assignment 1's repositories import in model code (pyproject's `lm` extra).
"""
from __future__ import annotations

ALLOWED: dict[str, tuple[str, ...]] = {
    "reversal": ("numpy", "tqdm", "matplotlib"),
    "block": ("numpy", "tqdm", "matplotlib"),
    "lm": ("einops", "einx", "jaxtyping", "numpy", "regex", "tqdm"),
}

# import name -> the name pip installs it under, where they differ
PIP_NAME = {"sklearn": "scikit-learn", "yaml": "PyYAML", "PIL": "Pillow"}


def allowed(assignment: str | None) -> tuple[str, ...]:
    return ALLOWED.get(str(assignment or ""), ())


def top_module(name) -> str:
    return str(name or "").split(".")[0]


def is_allowed(module, assignment) -> bool:
    return top_module(module) in allowed(assignment)


def install_command(module) -> str:
    top = top_module(module)
    return f"pip install {PIP_NAME.get(top, top)}"
