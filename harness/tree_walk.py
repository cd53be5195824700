"""Walking a student's folder: iterative, bounded, and saying what it left out (parent side, torch-free).

os.walk recurses once per level (Python 3.11): a folder 1,100 levels deep raises RecursionError, and a
folder of a million entries takes as long as it likes. This walk keeps its own queue (breadth first: the
shallow files, where a submission lives, come first), stops descending past `max_depth`, stops reading
after `max_entries` directory entries, never follows links, and reports each limit it hit and each folder
it could not read as one line an instructor can act on. Nothing in it raises for what a folder holds.
"""
from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

MAX_DEPTH = 24           # folders below the student's own; deeper ones are not searched (and are reported)
MAX_ENTRIES = 50_000     # directory entries read in one student's folder before the walk stops


@dataclass
class Walk:
    files: list = field(default_factory=list)      # (path, depth) of every regular file kept, breadth first
    skipped: list = field(default_factory=list)    # what was not searched, and why (one line each)
    entries: int = 0
    too_deep: int = 0
    truncated: bool = False

    def note(self, text: str) -> None:
        if len(self.skipped) < 20:
            self.skipped.append(text)


def walk(root: Path, *, keep_dir, keep_file, max_depth: int = MAX_DEPTH, max_entries: int = MAX_ENTRIES) -> Walk:
    """The files under `root` for which keep_file(name) holds, in folders for which keep_dir(name, depth) holds
    (depth 1: a folder directly in root)."""
    out = Walk()
    queue = deque([(Path(root), 0)])
    while queue:
        folder, depth = queue.popleft()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as e:
            out.note(f"could not read the folder {_rel(folder, root)}: {e.strerror or e}")
            continue
        subdirs = []
        for entry in entries:
            out.entries += 1
            if out.entries > max_entries:
                out.truncated = True
                out.note(f"stopped after {max_entries} entries: the rest of the folder was not searched")
                return out
            try:
                if entry.is_symlink():
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if keep_dir(entry.name, depth + 1):
                        subdirs.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False) and keep_file(entry.name):
                    out.files.append((Path(entry.path), depth))
            except OSError as e:
                out.note(f"could not read {_rel(Path(entry.path), root)}: {e.strerror or e}")
        if depth + 1 > max_depth:
            if subdirs:
                out.too_deep += len(subdirs)
                if out.too_deep == len(subdirs):
                    out.note(f"folders more than {max_depth} levels deep were not searched (first: "
                             f"{_rel(subdirs[0], root)[:160]})")
            continue
        queue.extend((d, depth + 1) for d in subdirs)
    return out


def _rel(p: Path, root: Path) -> str:
    try:
        return str(p.relative_to(root)) or "."
    except ValueError:
        return str(p)
