"""Threads the student's code starts, so that what they do is the student's (audit.py).

The audit hook tells the student's operations by the student's frame on the stack. A thread the student's code
starts with a function of no frame of its own (`threading.Thread(target=os.listdir, args=("/",))`,
`ThreadPoolExecutor().submit(os.system, "id")`, `_thread.start_new_thread(...)`) has no student frame: its
stack is threading's and the executor's. Python 3.11 raises no audit event when a thread starts, so the two
places every Python thread starts through, `_thread.start_new_thread` (also `_thread.start_new`) and threading's
own reference to it, are wrapped: a thread started while the student's code is on the stack (directly or
through a library it called; never the grader's own threads) runs its function under `_Started.__call__`, at the
bottom of its stack, which carries the student's line that started it. `Audit._who` stops there.

The wrappers are checked after every call into student code (hookwatch.py): put back, and reported, if the
submission swapped them out.
"""
from __future__ import annotations

import _thread
import sys


class _Started:
    """A thread's function, started by the student's code at `line`."""

    __slots__ = ("function", "line")

    def __init__(self, function, line):
        self.function, self.line = function, line

    def __call__(self, *args, **kwargs):
        return self.function(*args, **kwargs)


def watch_threads(audit) -> None:
    """Wrap the thread starts of `_thread` and `threading` (for the rest of this process's life)."""
    original = _thread.start_new_thread
    audit.thread_start = _Started.__call__.__code__

    def start_new_thread(function, args, kwargs=None):
        line = None
        if not audit._busy:
            audit._busy = True   # the walk below is the harness's own, not the student's operation
            try:
                who = audit._who(sys._getframe(1))
                if who is not None and not (who[0] != "student" and audit.grader and who[0].startswith(audit.grader)):
                    line = who[1]
            except Exception:
                line = None
            finally:
                audit._busy = False
        if line is not None:
            function = _Started(function, line)
        return original(function, args) if kwargs is None else original(function, args, kwargs)

    audit.thread_wrapper = start_new_thread
    install_wrappers(audit)


def install_wrappers(audit) -> list[str]:
    """Put the wrappers in place; the names the submission had swapped (for a finding): none the first time."""
    wrapper = getattr(audit, "thread_wrapper", None)
    gone = []
    for mod, name in ((_thread, "start_new_thread"), (_thread, "start_new"),
                      (sys.modules.get("threading"), "_start_new_thread")):
        if wrapper is not None and mod is not None and getattr(mod, name, None) is not wrapper:
            if getattr(audit, "threads_watched", False):
                gone.append(f"{mod.__name__}.{name}")
            setattr(mod, name, wrapper)
    audit.threads_watched = True
    return gone
