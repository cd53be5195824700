"""The run folder's disk use, watched from the parent while the run goes on.

RLIMIT_FSIZE caps each file a run writes (Limits.file_mb); nothing in the kernel caps their sum without
privileges (a quota, a size-capped mount of the host folder). The parent samples the folder's real usage
(allocated blocks, so a sparse file costs what it holds) every PERIOD_S and ends the run once it passes
limits.RUN_FOLDER_MB: many files just under the per-file cap cannot fill the grading machine's disk. A run
that makes more entries than the walk reads is over as well (inodes are disk too). The folder is the run's own,
or for a warm worker's run the worker's whole folder (a run can write beside its own there). Files a run's
processes hold open after unlinking them take disk no walk finds: `held` (a held.Sampler of the run's processes)
adds them."""
from __future__ import annotations

import os
import time

from ..limits import RUN_FOLDER_MB

PERIOD_S = 0.5          # how often the folder is walked; a run writes at most ~this long past the limit
MAX_ENTRIES = 100_000   # entries one sample reads; more than this is over the limit by itself


def usage(folder: str | list, max_entries: int = MAX_ENTRIES) -> tuple[int, int]:
    """(bytes allocated, entries) under `folder` (or each of a list: a warm split run's two slots, warm_split.py),
    without following links; stops counting at max_entries."""
    total, entries, todo = 0, 0, [folder] if isinstance(folder, str) else list(folder)
    while todo and entries < max_entries:
        d = todo.pop()
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            for e in it:
                entries += 1
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += st.st_blocks * 512
                if e.is_dir(follow_symlinks=False):
                    todo.append(e.path)
                if entries >= max_entries:
                    break
    return total, entries


class DiskWatch:
    """`over()`: the folder's MB once past the limit (else None), sampled at most every PERIOD_S."""
    kind = "disk"

    def __init__(self, folder, limit_mb: float = RUN_FOLDER_MB, period_s: float = PERIOD_S,
                 max_entries: int = MAX_ENTRIES, held=None):
        self.folder = [str(f) for f in folder] if isinstance(folder, (list, tuple)) else str(folder)
        self.limit_mb, self.period_s, self.max_entries = limit_mb, period_s, max_entries
        self.held = held
        self.peak_mb, self.entries, self._next, self.unlinked_mb = 0.0, 0, 0.0, 0.0

    def over(self) -> float | None:
        now = time.monotonic()
        if now < self._next:
            return None
        self._next = now + self.period_s
        used, self.entries = usage(self.folder, self.max_entries)
        unlinked = self.held.sample().disk if self.held is not None else 0
        mb = (used + unlinked) / 2 ** 20
        if mb > self.peak_mb:
            self.peak_mb, self.unlinked_mb = mb, unlinked / 2 ** 20
        return mb if mb > self.limit_mb or self.entries >= self.max_entries else None

    def reason(self) -> str:
        if self.entries >= self.max_entries:
            return f"made more than {self.max_entries:,} files and folders in its run folder"
        held = f" ({self.unlinked_mb:.0f} MB of it in files it unlinked while holding them open)" \
            if self.unlinked_mb >= 1 else ""
        return (f"wrote {self.peak_mb:.0f} MB into its run folder{held}, over the limit of {self.limit_mb:.0f} MB "
                f"of disk a run may take (measured from outside the run)")


class Watches:
    """Several watchdogs as one: `over()` is the first that fires; `kind` then says which."""

    def __init__(self, *watches):
        self.watches = [w for w in watches if w is not None]
        self.kind, self.fired = None, None

    def fire(self, watch) -> str:
        """Record `watch` as the one that fired (an end the run's cgroup saw: cgroup.py); returns its kind."""
        self.kind, self.fired = watch.kind, watch
        return watch.kind

    def over(self) -> float | None:
        for w in self.watches:
            v = w.over()
            if v is not None:
                self.kind, self.fired = w.kind, w
                return v
        return None
