"""Hooks the student's code leaves behind that are handed the grader's frames later, checked by the guard after
every call into student code (Guard._check_global_state) and put back.

* `sys.settrace` / `sys.setprofile` (audit.py also reports the call itself, as it happens);
* `threading.settrace` / `threading.setprofile`: no audit event; the hook is installed in every thread started
  afterwards, the grader's own included;
* a signal handler (`signal.signal`: no audit event): called with the frame it interrupts, the grader's when
  the signal arrives while a probe runs;
* the thread-start wrappers of threads.py, swapped out.

A trace, profile or signal hook written in torch's files is torch's own (not a finding); the others are the
student's, with the line of the function installed when it is the student's own. Each finding is a tamper
finding (the caller's `found`) and, for the frame hooks, also told to the parent at once (`tell`: check
`isolation`). SIGALRM is the probes' own time budget, set and restored around each call: not compared here.
"""
from __future__ import annotations

import os
import signal
import sys

from ..identity import code_of

_HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep   # the grader's own handlers
_SIGNALS = tuple(s for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGALRM))


def snapshot() -> dict:
    """The hooks now (the guard's record at capture, and the state before each call into student code)."""
    threading = sys.modules.get("threading")
    return {"trace": sys.gettrace(), "profile": sys.getprofile(),
            "threading": (getattr(threading, "_trace_hook", None), getattr(threading, "_profile_hook", None)),
            "signals": {s: signal.getsignal(s) for s in _SIGNALS}}


def check(base: dict | None, origin, found, audit=None) -> None:
    """Compare with `base` (a snapshot), put back what changed and report it: found(what, line), and
    audit.introspected(what, line) for a hook that is handed frames. origin(value) -> ('student'|'torch'|..., line)."""
    if not base:
        return
    tell = audit.introspected if audit is not None else None
    for name, get, put, key in (("settrace", sys.gettrace, sys.settrace, "trace"),
                                ("setprofile", sys.getprofile, sys.setprofile, "profile")):
        cur = get()
        if cur is not base[key]:
            who, line = origin(cur)
            if who != "torch":
                found(f"sys.{name} hook installed", line)
            put(base[key])
    threading = sys.modules.get("threading")
    if threading is not None:
        for i, (name, attr) in enumerate((("settrace", "_trace_hook"), ("setprofile", "_profile_hook"))):
            cur, was = getattr(threading, attr, None), base["threading"][i]
            if cur is not was:
                setattr(threading, attr, was)
                who, line = origin(cur)
                if who != "torch":
                    _both(found, tell, f"threading.{name} hook installed (handed every new thread's frames)", line)
    for sig, was in base["signals"].items():
        try:
            cur = signal.getsignal(sig)
        except (ValueError, OSError):
            continue
        code = code_of(cur)
        if cur is was or code is None or code.co_filename.startswith(_HARNESS):
            continue        # unchanged, no Python code to hand a frame to (SIG_IGN, a builtin), or the grader's
        who, line = origin(cur)
        if who == "torch":
            continue
        try:
            signal.signal(sig, was if was is not None else signal.SIG_DFL)
        except (ValueError, OSError, TypeError):
            pass
        _both(found, tell, f"a signal handler for {signal.Signals(sig).name} installed (handed the frame it "
                           f"interrupts)", line)
    if audit is not None:
        from .threads import install_wrappers
        for name in install_wrappers(audit):
            _both(found, tell, f"{name} replaced (the grader's record of threads the submission starts)", None)


def _both(found, tell, what: str, line) -> None:
    found(what, line)
    if tell is not None:
        tell(what, line)
