"""Integrity of the probes against the code they measure (the names older callers import).

A submission runs in the same Python process as the probes, so it can replace what the probes rely on.
Two defences, in four modules:

* guard.py, capture.py and identity.py, in the child: `capture()` records, before any student code runs,
  what the probes and the interceptor use; `Guard.check()` compares after every call into student code,
  puts back what the student's code changed and names it with the student's line (check `tamper`); torch's
  own side effects are not the student's.
* scan.py, in the parent: `scan_source()` reads the submission's text (never runs it) and names constructs
  that reach into the grader's process (check `tamper-static`).

Residual risk, stated plainly: a submission written specifically against mtxdiag can, in principle, find
and edit the guard's record in memory. That needs deliberate, harness-specific code, which the static scan
is there to catch; and a forged result can only ever change that student's own row.
"""
from __future__ import annotations

__all__ = ["EditSites", "GRADER_PREFIXES", "Guard", "MISSING", "bad_tensor", "capture", "edit_sites", "scan_source"]

from .capture import bad_tensor, capture  # noqa: F401
from .guard import Guard  # noqa: F401
from ..identity import GRADER_PREFIXES, MISSING  # noqa: F401
from ..scan import EditSites, edit_sites, scan_source  # noqa: F401
