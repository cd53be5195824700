"""The resident-memory watchdog on real processes and a run over its limit (child processes); its decisions in-process: tests/unit/test_memwatch.py."""
from __future__ import annotations

import time
import pytest
from harness.isolation import memwatch
from harness.api import check_file
from harness.runner import Limits

from test_memwatch import REFERENCE, _holding  # noqa: F401 (fixtures, helpers)


def test_watchdog_measures_resident_memory_of_every_process_of_the_run():
    a, b = _holding(150), _holding(150)
    try:
        both = memwatch.Watchdog(250, lambda: {a.pid, b.pid}, period_s=0)
        one = memwatch.Watchdog(250, lambda: {a.pid}, period_s=0)
        mb = both.over()
        assert mb is not None and 300 <= mb < 400, mb      # 2 x 150 MB touched, plus two interpreters
        assert one.over() is None and 150 <= one.peak_mb < 250, one.peak_mb
    finally:
        a.kill(), b.kill(), a.wait(), b.wait()


@pytest.mark.slow
def test_a_run_over_the_resident_limit_ends_as_memory_limit(tmp_path, monkeypatch):
    """What `--device cuda` gets, on the CPU: no address-space limit, the watchdog kills the run in forward."""
    monkeypatch.setattr(memwatch, "address_space_limit", lambda device, mb: None)
    sub = tmp_path / "greedy.py"
    sub.write_text(REFERENCE.read_text() + "\n\nclass MiniTransformer(MiniTransformer):\n"
                   "    def forward(self, src, tgt):\n"
                   "        self.hoard = torch.ones(600_000_000)   # 2.4 GB, touched: resident\n"
                   "        return super().forward(src, tgt)\n")
    t0 = time.monotonic()
    r = check_file(sub, quick=True, limits=Limits(timeout_s=120, memory_mb=1500))
    causes = [d["id"] for d in r["diagnoses"]]
    assert r["verdict"] == "error" and causes == ["memory-limit"], (causes, r.get("error"))
    assert "resident" in r["error"]["reason"] and "1500 MB" in r["error"]["reason"], r["error"]
    assert time.monotonic() - t0 < 60


def test_descendants_read_from_the_tree_are_the_members_below_it():
    """What the watches sample every period (held.descendants: the tree's own children files) is what the whole
    process table says is below the root (sandbox.members), grandchildren included."""
    import subprocess
    import sys
    from harness.isolation import held, sandbox
    p = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; subprocess.Popen(['sleep', '30']); "
                          "subprocess.Popen(['sh', '-c', 'sleep 30 & wait']); time.sleep(30)"])
    try:
        for _ in range(100):
            below = held.descendants(p.pid)
            if below is not None and len(below) >= 4:
                break
            time.sleep(0.05)
        assert below is not None and len(below) == 4, below            # python, its sleep, sh, sh's sleep
        assert below == sandbox.members(p.pid), (below, sandbox.members(p.pid))
    finally:
        sandbox.kill_tree(p.pid, None, None)
        p.wait()
