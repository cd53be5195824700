"""The CUDA memory limit (harness/memwatch.py): resident size, not address space, and a run over it ends as
`memory-limit`. No GPU here: the CUDA choice is tested as a choice, the watchdog on real processes."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import memwatch
from harness.api import check_file
from harness.runner import Limits

REFERENCE = Path(__file__).resolve().parent.parent / "reference_model" / "reversal.py"
HOLD = "import sys, time\nb = bytearray(b'\\x01') * ({mb} << 20)\nprint('ready', flush=True)\ntime.sleep(60)\n"


def test_cuda_runs_get_no_address_space_limit_and_a_watchdog_instead():
    assert memwatch.address_space_limit("cpu", 6144) == 6144 << 20
    assert memwatch.address_space_limit("cuda", 6144) is None          # a CUDA context reserves more than this
    assert memwatch.address_space_limit("cuda:1", 6144) is None
    assert memwatch.watchdog_for("cpu", 6144, set) is None             # the kernel enforces the CPU limit
    assert isinstance(memwatch.watchdog_for("cuda", 6144, set), memwatch.Watchdog)
    assert memwatch.watchdog_for("cuda", 0, set) is None               # no limit asked for


def _holding(mb: int) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLD.format(mb=mb)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


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


def test_watchdog_samples_at_its_period_and_ignores_gone_processes():
    w = memwatch.Watchdog(1, lambda: {2 ** 22 + 7}, period_s=60)       # a pid that does not exist
    assert w.over() is None and w.peak_mb == 0
    assert memwatch.resident_kb(2 ** 22 + 7) == 0


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
