"""What a check's child process left behind, as both sides read it: the runner fills a ChildOutcome, the
engine turns it into a result. A small module of plain data so that the engine never imports the subprocess
code (runner.py) to read it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .protocol import OUTCOME_STATUSES


@dataclass
class ChildOutcome:
    """What the parent observed: the validated payload or why there is none."""
    payload: dict | None
    status: str                     # one of protocol.OUTCOME_STATUSES
    reason: str = ""
    returncode: int | None = None
    seconds: float = 0.0
    phase: str | None = None        # last phase the child announced
    stdout: str = ""
    stderr: str = ""
    stack: str = ""                 # the child's Python stack when it was stopped for running too long
    phases: list = field(default_factory=list)
    isolation: str = ""             # "bwrap" or "none": how the child was isolated
    integrity: list = field(default_factory=list)   # tampering the parent observed (channel, static scan)
    limits: dict = field(default_factory=dict)      # how the run's resources were limited (isolation/enforce.py)

    def __post_init__(self):
        if self.status not in OUTCOME_STATUSES:     # a typo here would become a student's "crashed"
            raise ValueError(f"not an outcome status: {self.status!r}")


def stack_line(stack: str, path: str) -> int | None:
    """The innermost line of the student's file in a faulthandler dump."""
    lines = re.findall(r'File "([^"]+)", line (\d+)', stack)
    # faulthandler prints the innermost frame first
    for f, n in lines:
        if f == path or f.endswith("/submission.py") or f.endswith("/submission.ipynb"):
            return int(n)
    return None
