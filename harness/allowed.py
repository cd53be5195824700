"""The third-party packages each assignment allows a student to import (besides torch and the standard
library). A module the grader lacks but the assignment allows is the grader's environment, never the
student's fault: the check reports it as a grader fault with the command that installs it
(`missing_module_fault`), and `mtxdiag gradescope build` installs them in the autograder.

Each assignment declares its list (`Assignment.packages`, harness/assignments.py).
"""
from __future__ import annotations

from .assignments import ALL

ALLOWED: dict[str, tuple[str, ...]] = {a.name: a.packages for a in ALL}

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
