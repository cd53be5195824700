"""A pack's submission folder into the sandbox's work folder, in the pack's layout. Parent side, torch-free.

packs/folder.py says where the pack's files are: under their own paths (the folder, or one folder inside it: that
folder's Python files are copied as repo_copy copies a repository, bounded, the pack's files first), or alone by
name (each copied to its pack path, so that `cs231n/transformer_layers.py` imports as `cs231n.transformer_layers`
whichever way it was handed in). The pack's files are scanned statically, as a single file is.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from ..assignments import folder_pack_of
from ..packs.api import Pack
from ..packs.folder import locate
from .repo_copy import REPO_FILE_BYTES, copy_repo, select


def copy_folder(assignment: str, src: Path, dst: Path, scan, shown: str | None = None,
                skipped: list | None = None) -> list[dict]:
    """A folder submission into `dst`: a pack's in its layout (copy_pack), a repository's as repo_copy copies it."""
    pack = folder_pack_of(assignment)
    if pack is not None:
        return copy_pack(pack, src, dst, scan, shown, skipped)
    return copy_repo(src, dst, scan, shown, skipped)


def chosen(pack: Pack, src: Path, skipped: list | None = None) -> list[tuple[Path, Path]]:
    """(file, path in the pack's layout) of what a check of `src` reads, the pack's files first; [] when the
    pack's first file is nowhere. `skipped` hears what the bounds left out."""
    where = locate(pack, Path(src))
    if where is None:
        return []
    first = [(p, Path(rel)) for rel, p in where.files.items() if p.stat().st_size <= REPO_FILE_BYTES]
    if where.flat:
        return first
    sel = select(where.root)
    if skipped is not None:
        skipped += sel.skipped
    return first + [(p, rel) for p, rel in sel.files if rel.as_posix() not in where.files]


def copy_pack(pack: Pack, src: Path, dst: Path, scan, shown: str | None = None,
              skipped: list | None = None) -> list[dict]:
    """Copy the pack's submission in `src` into `dst`; the static findings of its files. `skipped` hears what was
    left out. A folder where the pack's first file is nowhere is copied empty (the child says what is missing)."""
    shown = (shown or str(src)).rstrip("/")
    dst.mkdir(parents=True, exist_ok=True)
    static: list[dict] = []
    for p, rel in chosen(pack, Path(src), skipped):
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, dst / rel)
        if rel.as_posix() in pack.files:           # named in the copy's layout, as the child names its lines
            display = f"{shown}/{rel.as_posix()}"
            for finding in scan(dst / rel, display):
                if finding.get("location"):
                    finding["location"] = dict(finding["location"], file=display)
                static.append(finding)
    return static
