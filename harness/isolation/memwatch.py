"""Which memory limit a run gets, and the watchdog that measures a run's memory from outside where no cgroup does.

On the CPU the child gets RLIMIT_AS: cheap, enforced by the kernel, and an over-limit allocation fails as a
MemoryError the child reports itself. A CUDA context reserves far more *virtual* address space than it uses
(tens of GB on a large GPU, for its unified address map), so under a 6 GB address-space limit
`--device cuda` fails while creating the context. For CUDA the parent instead samples what the run's processes
hold resident (VmRSS from /proc, summed over every process of the run) and kills the run when the sum passes
the limit. Resident size is what a shared grading machine actually runs out of. GPU memory itself is not
counted here: the driver does not charge it to the process's resident set.

On the CPU too, where no cgroup (cgroup.py) charges a run's memory, the watchdog counts what RLIMIT_AS does not:
memory held as files (memfd, /dev/shm, the run's private tmpfs; held.py) on top of private memory.
"""
from __future__ import annotations

import time

from .held import Sampler

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
    """Samples what the run's processes hold at most every PERIOD_S; `over()` is the measured MB once past the limit.

    `pids` returns the live processes of the run (sandbox.members), so a child that forks its way around the
    limit is still counted whole. What is counted (held.py): private memory, plus memory held as files - memfd,
    shared memory, the run's private tmpfs - which no address-space limit sees; `resident` (CUDA, where no
    address-space limit is set) adds mapped file pages, as VmRSS does. `sampler`: a held.Sampler shared with the
    disk watch (one reading of /proc per period for both)."""

    kind = "memory"

    def __init__(self, limit_mb: int, pids, period_s: float = PERIOD_S, resident: bool = True, sampler=None):
        self.limit_mb, self.resident = limit_mb, resident
        self.sampler = sampler or Sampler(pids, 0)
        self.period_s, self.peak_mb, self.files_mb = period_s, 0.0, 0.0
        self._next = 0.0

    def over(self) -> float | None:
        now = time.monotonic()
        if now < self._next:
            return None
        self._next = now + self.period_s
        h = self.sampler.sample()
        mb = h.memory_mb(self.resident)
        if mb > self.peak_mb:
            self.peak_mb, self.files_mb = mb, h.files_mb()
        return mb if mb > self.limit_mb else None

    def reason(self, device: str = "cpu") -> str:
        if self.resident:
            return (f"held {self.peak_mb:.0f} MB resident, over the limit of {self.limit_mb} MB (resident-size "
                    f"limit for {device})")
        return (f"held {self.peak_mb:.0f} MB of memory ({self.files_mb:.0f} MB of it as memfd, shared-memory or "
                f"tmpfs files, which the address-space limit does not count), over the memory limit of "
                f"{self.limit_mb} MB (measured from outside the run)")


def watchdog_for(device: str, memory_mb: int, pids, sampler=None) -> Watchdog | None:
    """The watchdog a run needs where no cgroup enforces its memory: resident size where the address-space limit
    is not set (CUDA), else private memory plus what it holds as files (which RLIMIT_AS does not count)."""
    if not memory_mb:
        return None
    return Watchdog(memory_mb, pids, resident=address_space_limit(device, memory_mb) is None, sampler=sampler)
