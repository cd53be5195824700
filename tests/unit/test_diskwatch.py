"""The run folder's disk watch (harness/isolation/diskwatch.py): real usage summed over the folder, the limit in MB and
in entries, sampled at most every period; several watchdogs as one."""
from __future__ import annotations

import os

from harness.isolation import diskwatch


def test_usage_sums_allocated_blocks_of_every_file(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.bin").write_bytes(b"\1" * (3 << 20))
    (tmp_path / "y.bin").write_bytes(b"\1" * (1 << 20))
    with open(tmp_path / "sparse.bin", "wb") as f:         # 1 GB apparent, nothing written: costs no disk
        f.truncate(1 << 30)
    used, entries = diskwatch.usage(str(tmp_path))
    assert 4 << 20 <= used < 5 << 20 and entries == 4


def test_over_the_limit_in_mb_or_in_entries(tmp_path):
    w = diskwatch.DiskWatch(tmp_path, limit_mb=2, period_s=0)
    assert w.over() is None
    (tmp_path / "big.bin").write_bytes(b"\1" * (3 << 20))
    assert w.over() is not None and "over the limit of 2 MB" in w.reason()
    (tmp_path / "big.bin").unlink()
    for i in range(6):
        (tmp_path / f"f{i}").touch()
    w = diskwatch.DiskWatch(tmp_path, limit_mb=2, period_s=0, max_entries=5)
    assert w.over() is not None and "more than 5 files" in w.reason()


def test_sampled_at_most_every_period_and_combined(tmp_path):
    w = diskwatch.DiskWatch(tmp_path, limit_mb=1, period_s=3600)
    assert w.over() is None
    (tmp_path / "big.bin").write_bytes(b"\1" * (2 << 20))
    assert w.over() is None                                  # not sampled again within the period
    both = diskwatch.Watches(None, diskwatch.DiskWatch(tmp_path, limit_mb=1, period_s=0))
    assert both.over() is not None and both.kind == "disk" and both.fired.peak_mb >= 2
    assert os.path.exists(tmp_path / "big.bin")
