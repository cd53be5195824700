"""The CUDA memory limit (harness/isolation/memwatch.py): resident size, not address space, and a run over it ends as
`memory-limit`. No GPU here: the CUDA choice is tested as a choice, the watchdog on real processes."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path


from harness.isolation import memwatch

REFERENCE = Path(__file__).resolve().parents[2] / "reference_model" / "reversal.py"
HOLD = "import sys, time\nb = bytearray(b'\\x01') * ({mb} << 20)\nprint('ready', flush=True)\ntime.sleep(60)\n"


def test_cuda_runs_get_no_address_space_limit_and_a_watchdog_instead():
    assert memwatch.address_space_limit("cpu", 6144) == 6144 << 20
    assert memwatch.address_space_limit("cuda", 6144) is None          # a CUDA context reserves more than this
    assert memwatch.address_space_limit("cuda:1", 6144) is None
    cpu = memwatch.watchdog_for("cpu", 6144, set)       # the kernel enforces the address space; the watchdog
    assert isinstance(cpu, memwatch.Watchdog) and not cpu.resident     # counts memory held as files beside it
    assert memwatch.watchdog_for("cuda", 6144, set).resident
    assert memwatch.watchdog_for("cuda", 0, set) is None               # no limit asked for


def _holding(mb: int) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLD.format(mb=mb)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def test_watchdog_samples_at_its_period_and_ignores_gone_processes():
    w = memwatch.Watchdog(1, lambda: {2 ** 22 + 7}, period_s=60)       # a pid that does not exist
    assert w.over() is None and w.peak_mb == 0
    assert memwatch.resident_kb(2 ** 22 + 7) == 0


