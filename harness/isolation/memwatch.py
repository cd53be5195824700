"""Which memory limit a run gets, and the resident-size watchdog used where an address-space limit cannot work.

On the CPU the child gets RLIMIT_AS: cheap, enforced by the kernel, and an over-limit allocation fails as a
MemoryError the child reports itself. A CUDA context reserves far more *virtual* address space than it uses
(tens of GB on a large GPU, for its unified address map), so under a 6 GB address-space limit
`--device cuda` fails while creating the context. For CUDA the parent instead samples what the run's processes
hold resident (VmRSS from /proc, summed over every process of the run) and kills the run when the sum passes
the limit. Resident size is what a shared grading machine actually runs out of. GPU memory itself is not
counted here: the driver does not charge it to the process's resident set.
"""
from __future__ import annotations

import time

PERIOD_S = 0.25      # how often the watchdog samples; an allocation faster than this can overshoot by that much


def address_space_limit(device: str, memory_mb: int) -> int | None:
    """Bytes for RLIMIT_AS, or None where the watchdog enforces the limit instead (CUDA) or there is none."""
    if not memory_mb or str(device).startswith("cuda"):
        return None
    return memory_mb * 1024 * 1024


def resident_kb(pid: int) -> int:
    """VmRSS of one process in kB; 0 for a process that is gone, a zombie, or unreadable."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


class Watchdog:
    """Samples the run's resident memory at most every PERIOD_S; `over()` is the measured MB once past the limit.

    `pids` returns the live processes of the run (sandbox.members), so a child that forks its way around the
    limit is still counted whole."""

    kind = "memory"

    def __init__(self, limit_mb: int, pids, period_s: float = PERIOD_S):
        self.limit_mb, self.pids, self.period_s = limit_mb, pids, period_s
        self.peak_mb = 0.0
        self._next = 0.0

    def over(self) -> float | None:
        now = time.monotonic()
        if now < self._next:
            return None
        self._next = now + self.period_s
        mb = sum(resident_kb(p) for p in self.pids()) / 1024
        self.peak_mb = max(self.peak_mb, mb)
        return mb if mb > self.limit_mb else None


def watchdog_for(device: str, memory_mb: int, pids) -> Watchdog | None:
    """The watchdog a run needs: one exactly where the address-space limit is not set."""
    if not memory_mb or address_space_limit(device, memory_mb) is not None:
        return None
    return Watchdog(memory_mb, pids)
