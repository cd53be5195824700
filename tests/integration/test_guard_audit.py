"""The guard's fast path under a real audit hook (in a fresh interpreter); the guard in-process: tests/unit/test_guard.py."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_the_fast_path_raises_no_audit_event_per_object():
    """The child's audit hook runs Python for every event: a check must not raise one per object it compares.
    (In a fresh interpreter: an audit hook can never be removed, and would slow every later test.)"""
    code = (
        "import sys\n"
        "from harness.child.capture import capture\n"
        "g = capture()\n"
        "events = []\n"
        "sys.addaudithook(lambda e, a: events.append(e))\n"
        "g.check(hot=True); g.check()\n"
        "print(len(events), sorted(set(events)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr[-2000:]
    n = int(out.stdout.split()[0])
    assert n < 100, out.stdout[:500]
