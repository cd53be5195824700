"""`mtxdiag watch FILE`: check again each time the student saves, in a warm worker.

A student edits, saves and wants to know whether the bug is gone. A cold `check` starts a sandbox and an
interpreter and imports torch every time; here the first check starts a warm worker (warm.py) and every
later one forks it, so a re-check costs the probes and the report, not the start-up. Each check is still a
fresh process with its own limits, folder and result channel, exactly as in `grade`.

What counts as a change is what a check reads: the file's bytes, or a repository's Python files
(repo_copy.repo_files: names, sizes, modification times). A save that arrives in several writes is checked
once: the fingerprint must hold still for one poll interval first.
"""
from __future__ import annotations

import hashlib
import time
from pathlib import Path


def fingerprint(path: Path) -> str | None:
    """A digest of what a check of `path` reads; None while it is missing or unreadable (mid-save)."""
    h = hashlib.sha256()
    try:
        if path.is_dir():
            from ..isolation.repo_copy import repo_files
            for p, rel in repo_files(path):
                st = p.stat()
                h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        else:
            h.update(path.read_bytes())
    except OSError:
        return None
    return h.hexdigest()


def next_change(path: Path, seen: str | None, interval: float, sleep=time.sleep, clock=time.monotonic,
                on_missing=None) -> str:
    """Wait until what `path` holds differs from `seen` and then holds still for one interval; its fingerprint.

    `on_missing` is called once each time the file disappears (deleted, or renamed away by an editor's save)."""
    missing = False
    while True:
        sleep(interval)
        now = fingerprint(path)
        if now is None:
            if not missing and on_missing is not None:
                on_missing()
            missing = True
            continue
        missing = False
        if now == seen:
            continue
        sleep(interval)                       # an editor may still be writing: take it when it holds still
        if fingerprint(path) == now:
            return now


def loop(path: Path, check_once, *, interval: float = 0.5, max_runs: int | None = None, say=print,
         sleep=time.sleep) -> dict | None:
    """Check `path` now, then after every change; returns the last result (after `max_runs` checks, or when
    the user stops it with Ctrl-C). `check_once(n)` runs check number n and returns its result."""
    last, n = None, 0
    seen = fingerprint(path)
    try:
        while max_runs is None or n < max_runs:
            n += 1
            t = time.monotonic()
            last = check_once(n)
            say(f"  checked in {time.monotonic() - t:.1f} s · watching {path} for changes (Ctrl-C to stop)")
            if max_runs is not None and n >= max_runs:
                break
            seen = next_change(path, seen, interval, sleep=sleep,
                               on_missing=lambda: say(f"  {path} is gone; waiting for it to come back"))
            say("")
            say(f"── {path} changed at {time.strftime('%H:%M:%S')}: check {n + 1}")
    except KeyboardInterrupt:
        say("  stopped watching")
    return last
