"""What a run holds, measured from outside through /proc (harness/isolation/held.py), on this very process: memory
held as memfd files (open, or mapped after the descriptor closed, each counted once) and disk held by files
unlinked while open; and the watches that end a run on them (memwatch.Watchdog, diskwatch.DiskWatch)."""
from __future__ import annotations

import mmap
import os

from harness.isolation import diskwatch, held, memwatch

MB = 1 << 20


def _me():
    return {os.getpid()}


def _memfd(mb: int) -> int:
    fd = os.memfd_create("held-test")
    os.write(fd, b"\1" * (mb * MB))
    return fd


def test_memfds_held_open_or_mapped_count_once_by_their_blocks():
    before = held.measure(_me())
    a, b = _memfd(6), _memfd(3)
    mapped = mmap.mmap(b, 3 * MB)
    mapped[0]                            # touched: resident in this process too, still counted once
    os.close(b)                          # held only by the mapping now
    try:
        h = held.measure(_me())
        assert 9 * MB <= h.objects - before.objects < 9 * MB + 64 * 1024, (before, h)
        assert h.files_mb() - before.files_mb() >= 9 - 0.1
        assert h.memory_mb() - before.memory_mb() >= 9 - 0.5
    finally:
        mapped.close()
        os.close(a)
    assert held.measure(_me()).objects == before.objects


def test_files_unlinked_while_open_count_as_disk_and_linked_ones_do_not(tmp_path):
    before = held.measure(_me()).disk
    kept = open(tmp_path / "kept.bin", "wb")
    kept.write(b"\1" * (2 * MB)), kept.flush()
    gone = open(tmp_path / "gone.bin", "wb")
    gone.write(b"\1" * (5 * MB)), gone.flush()
    os.unlink(tmp_path / "gone.bin")
    try:
        assert held.measure(_me()).disk - before == 5 * MB       # the linked file is the folder walk's to count
    finally:
        kept.close(), gone.close()
    assert held.measure(_me()).disk == before


def test_gone_processes_hold_nothing():
    assert held.measure({2 ** 22 + 7}) == held.Held()


def test_the_cpu_watchdog_counts_memfds_the_address_space_limit_does_not():
    base = held.measure(_me()).memory_mb()
    w = memwatch.Watchdog(int(base) + 4, _me, period_s=0, resident=False)
    assert w.over() is None
    fd = _memfd(8)
    try:
        assert w.over() is not None
        assert "memfd" in w.reason() and f"limit of {int(base) + 4} MB" in w.reason(), w.reason()
        assert w.files_mb >= 8
    finally:
        os.close(fd)


def test_the_disk_watch_adds_what_the_run_holds_unlinked(tmp_path):
    f = open(tmp_path / "x.bin", "wb")
    f.write(b"\1" * (3 * MB)), f.flush()
    os.unlink(tmp_path / "x.bin")
    try:
        blind = diskwatch.DiskWatch(tmp_path, limit_mb=2, period_s=0)
        assert blind.over() is None                                     # the walk alone finds nothing
        w = diskwatch.DiskWatch(tmp_path, limit_mb=2, period_s=0, held=held.Sampler(_me))
        assert w.over() is not None and "unlinked while holding them open" in w.reason(), w.reason()
    finally:
        f.close()


def test_the_sampler_reads_proc_once_per_period():
    calls = []
    s = held.Sampler(lambda: calls.append(1) or set(), period_s=3600)
    s.sample(), s.sample()
    assert len(calls) == 1


def test_a_mapped_memfd_never_touched_is_found_when_the_mappings_are_read():
    """No RssShmem shows it (no page of it is resident in the process): only the full reading of the mappings,
    which the sampler makes every fourth period, finds it."""
    before = held.measure(_me()).objects
    fd = _memfd(4)
    mapped = mmap.mmap(fd, 4 * MB)
    os.close(fd)
    try:
        assert held.measure(_me(), maps=True).objects - before == 4 * MB
        s = held.Sampler(_me, period_s=0, maps_every=2)
        assert s.sample().objects - before == 4 * MB        # the first sample reads them all
    finally:
        mapped.close()
