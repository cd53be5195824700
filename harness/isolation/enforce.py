"""One run's resources, enforced and measured outside the run: what runner.py asks for every check.

Where the machine delegates cgroup v2 (cgroup.detect), the run gets a cgroup of its own: the kernel charges it
every page (memfd, shared memory and tmpfs included) against memory.max and ends it there, bounds its tasks and
gives it one share of the CPU, whatever it starts. Elsewhere the rlimits (scratch.rlimits) stay, and the parent
measures what they do not count (memwatch.Watchdog over held.py: memory held as files). Disk is measured from
outside either way (diskwatch.DiskWatch: the folder the run can write, plus files it holds open after unlinking
them). `info()` is what the result says about it (`limits`: which is active, and the limits).
"""
from __future__ import annotations

from ..limits import RUN_FOLDER_MB
from . import cgroup, memwatch
from .diskwatch import DiskWatch, Watches
from .held import Sampler

SAMPLE_S = 0.5          # one reading of the run's processes in /proc per period, for both watches


class CgroupEnd:
    """What `RunLimits.settle` reports when the kernel ended the run at its cgroup's memory.max."""
    kind = "memory"

    def __init__(self, group: cgroup.RunGroup):
        self.group = group

    def reason(self, device: str = "cpu") -> str:
        return (f"reached its memory limit of {self.group.memory_mb} MB (the run's cgroup, which counts memfd, "
                f"shared memory and tmpfs too; peak {self.group.peak_mb():.0f} MB) and was ended by the kernel")


class _Adopt:
    """Not a limit: each sample, moves into the run's cgroup any process of the run not in it yet (a warm fork
    and what it started before it was moved). Never fires."""
    kind = "adopt"

    def __init__(self, group: cgroup.RunGroup, sampler: Sampler):
        self.group, self.sampler, self.seen = group, sampler, -1

    def over(self):
        self.sampler.sample()
        if self.sampler.n == self.seen:            # nothing new read since the last look
            return None
        self.seen = self.sampler.n
        stray = self.sampler.members - self.group.members()
        if stray:
            self.group.adopt(sorted(stray))
        return None


class RunLimits:
    def __init__(self, lim, device: str = "cpu"):
        self.lim, self.device = lim, device
        found = cgroup.detect()
        self.group: cgroup.RunGroup | None = None
        self.why = found.why
        if found.enforced_by == "cgroup-v2":
            try:
                self.group = cgroup.RunGroup(found.parent, lim.memory_mb, lim.processes,
                                             max(lim.cores, lim.threads, 1))
            except OSError as e:
                self.why = f"could not make the run's cgroup under {found.parent}: {e.strerror}"

    @property
    def enforced_by(self) -> str:
        return "cgroup-v2" if self.group is not None else "rlimits"

    def join_path(self) -> str | None:
        """cgroup.procs for a cold child to join before exec (cgroup.joiner); None without a cgroup."""
        return self.group.procs_file() if self.group is not None else None

    def adopt(self, pids) -> None:
        if self.group is not None:
            self.group.adopt(sorted(pids))

    def watch(self, pids, folder) -> Watches:
        """The parent's watches of the run: disk always; memory where no cgroup charges it; with a cgroup, the
        sweep that keeps every process of the run in it."""
        sampler = Sampler(pids, SAMPLE_S)
        memory = None if self.group is not None else \
            memwatch.watchdog_for(self.device, self.lim.memory_mb, pids, sampler=sampler)
        adopt = _Adopt(self.group, sampler) if self.group is not None else None
        return Watches(adopt, memory, DiskWatch(folder, held=sampler))

    def settle(self, finished, watch: Watches):
        """After the run: an end the kernel made at the cgroup's memory.max counts as the memory watch's."""
        if self.group is not None and finished is True and self.group.oom_kills():
            return watch.fire(CgroupEnd(self.group))
        return finished

    def info(self) -> dict:
        out = {"enforced_by": self.enforced_by, "memory_mb": self.lim.memory_mb, "disk_mb": RUN_FOLDER_MB,
               "measured_outside": True}
        if self.group is not None:
            out.update(pids=self.lim.processes, cpus=self.group.cores)
        elif self.why:
            out["why"] = self.why
        return out

    def close(self) -> None:
        if self.group is not None:
            self.group.remove()
