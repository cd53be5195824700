"""An `lm` repository into the sandbox's work folder: its Python files only, bounded, scanned.

Parent side (runs before the child starts). `scan(path, display)` is the runner's static scan of one file.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

REPO_MAX_FILES, REPO_MAX_BYTES, REPO_FILE_BYTES = 3000, 40 * 1024 * 1024, 2 * 1024 * 1024


def repo_files(src: Path):
    """The repository's files a check reads, as (path, path relative to src): its Python files (no data, no .git,
    no links), within the bounds on their number and size."""
    from .lm_loader import SKIP_ANYWHERE, SKIP_DIRS
    n, total = 0, 0
    for dirpath, dirnames, filenames in os.walk(src, followlinks=False):
        skip = SKIP_DIRS if Path(dirpath) == src else SKIP_ANYWHERE   # cs336_basics/data/ is code, ./data is not
        dirnames[:] = sorted(d for d in dirnames if d not in skip and not d.startswith("."))
        for f in sorted(filenames):
            p = Path(dirpath) / f
            if not f.endswith(".py") or p.is_symlink() or not p.is_file():
                continue
            size = p.stat().st_size
            if size > REPO_FILE_BYTES or n >= REPO_MAX_FILES or total + size > REPO_MAX_BYTES:
                continue
            n, total = n + 1, total + size
            yield p, p.relative_to(src)


def copy_repo(src: Path, dst: Path, scan, shown: str | None = None) -> list[dict]:
    """Copy a repository's Python files (repo_files) into the work folder; scan them."""
    static = []
    for p, rel in repo_files(src):
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, dst / rel)
        # scanned: the adapters and package modules (what the adapters can import); not the course's tests,
        # nor loose scripts (a training script's eval() never runs in a check and must not read as tampering)
        in_package = len(rel.parts) > 1 and (src / rel.parts[0] / "__init__.py").is_file()
        if rel.name == "adapters.py" or (in_package and rel.parts[0] != "tests"):
            for finding in scan(dst / rel, f"{shown or src}/{rel}"):
                finding["location"] = dict(finding.get("location") or {}, file=f"{shown or src}/{rel}") \
                    if finding.get("location") else None
                static.append(finding)
    dst.mkdir(exist_ok=True)
    return static
