"""Where `pytest --mtxdiag` points: the student's own line that a failing component runs, and the fix.

The adapter is called once on mtxdiag's first input with a profiler on: the first function it reaches in the
student's repository (not the adapter, a test file, the grader or installed packages; a forward first) is the
component's code; a raise inside the student's code names its line instead. Runs in the student's pytest process, as the plugin does."""
from __future__ import annotations

import os
import sys

from ..identity import PACKAGES


def _own(path: str, root: str) -> bool:
    path = os.path.realpath(path)
    if not path.startswith(root + os.sep) or "site-packages" in path or "dist-packages" in path:
        return False
    rel = os.path.relpath(path, root).split(os.sep)
    name = rel[-1]
    return rel[0] not in PACKAGES and not name.startswith(("test_", "conftest"))


def locate(component: str, fn, root) -> str | None:
    """'cs336_basics/model.py:42 (forward)', or None when nothing of the student's ran."""
    if fn is None:
        return None
    from ..child.probes.lm.diag.fingerprint import outputs        # torch: imported only here, in the student's pytest process
    root = os.path.realpath(str(root))
    calls: list[tuple[str, int, str]] = []
    raised: list[tuple[str, int, str]] = []

    def prof(frame, event, arg):
        f = frame.f_code.co_filename
        if event == "call" and len(calls) < 200 and _own(f, root):
            calls.append((f, frame.f_code.co_firstlineno, frame.f_code.co_name))
        return prof

    def trace_raise(frame, event, arg):
        if event == "exception" and _own(frame.f_code.co_filename, root) and not raised:
            raised.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
        return trace_raise

    old_p, old_t = sys.getprofile(), sys.gettrace()
    sys.setprofile(prof)
    sys.settrace(trace_raise)
    try:
        outputs(component, 0, fn)
    except Exception:                                   # noqa: BLE001 - the location is a help, never a failure
        pass
    finally:
        sys.setprofile(old_p)
        sys.settrace(old_t)
    def rank(c):      # the model's own code before the adapter; a forward before a constructor
        return (os.path.basename(c[0]) == "adapters.py", c[2] not in ("forward", "__call__"))
    pick = raised[0] if raised else (min(calls, key=rank) if calls else None)
    if pick is None:
        return None
    return f"{os.path.relpath(pick[0], root)}:{pick[1]} ({pick[2]})"


def fix_for(cause: str | None) -> str | None:
    if not cause:
        return None
    try:
        from ..causes import BY_ID
    except ImportError:
        return None
    c = BY_ID.get(cause)
    return c.fix if c is not None and c.fix else None
