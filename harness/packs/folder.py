"""A pack's submission folder: where its files are and which edition they are. Torch-free, stdlib only.

Three layouts are recognised, tried in this order (`files` are the pack's paths, e.g. cs231n/transformer_layers.py
and cs231n/classifiers/transformer.py):

    the folder holds the pack's paths              ASSIGNMENT/cs231n/transformer_layers.py
    the folder holds the files alone, by name      ASSIGNMENT/transformer_layers.py (+ transformer.py)
    one folder inside holds the pack's paths       REPO/assignment3/cs231n/transformer_layers.py

The pack's first file recognises a submission; the others are used when present (a piece whose file is missing
is reported absent by the contract check, never a crash). The parent copies the files in the pack's layout
(isolation/pack_copy.py), so the child imports the binding targets' modules (`cs231n.transformer_layers`) alike.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .api import Edition, Pack

MAX_DEPTH = 4                   # how deep a nested layout is looked for
SKIP = {".git", "__pycache__", "node_modules", ".ipynb_checkpoints", "venv", ".venv", "site-packages", "datasets"}
MAX_MARKER_BYTES = 2 * 1024 * 1024


@dataclass
class Located:
    root: Path                                  # the folder the pack's paths are relative to
    files: dict[str, Path] = field(default_factory=dict)     # pack path -> the file that stands for it
    flat: bool = False                          # the files alone, by name (not under the pack's paths)


def _nested(folder: Path, rel: str) -> Path | None:
    """The shallowest folder under `folder` (at most MAX_DEPTH down) holding `rel`; the first by name on a tie."""
    parts = Path(rel).parts
    level = [folder]
    for _ in range(MAX_DEPTH):
        nxt = []
        for d in level:
            try:
                subs = sorted(p for p in d.iterdir() if p.is_dir() and not p.is_symlink()
                              and p.name not in SKIP and not p.name.startswith("."))
            except OSError:
                continue
            for s in subs:
                if s.joinpath(*parts).is_file():
                    return s
            nxt += subs
        level = nxt[:2000]
    return None


def locate(pack: Pack, folder: str | Path) -> Located | None:
    """Where `pack`'s files are in `folder`; None when its first file is nowhere (not this pack's folder)."""
    folder = Path(folder)
    if not pack.files or not folder.is_dir():
        return None
    first = pack.files[0]
    if (folder / first).is_file():
        root = folder
    elif (folder / Path(first).name).is_file():
        named = {f: folder / Path(f).name for f in pack.files}
        return Located(folder, {f: p for f, p in named.items() if p.is_file() and not p.is_symlink()}, flat=True)
    else:
        found = _nested(folder, first)
        if found is None:
            return None
        root = found
    return Located(root, {f: root / f for f in pack.files if (root / f).is_file() and not (root / f).is_symlink()})


def _holds(text: str | None, marker: str) -> bool:
    return text is not None and marker in text


def edition_of(pack: Pack, text_of) -> Edition | None:
    """The edition a submission is: the first (in the pack's order) whose every marker holds (`markers`: pack
    path -> a substring its text contains; an edition without markers always holds, so it goes last as the
    fallback); `text_of(pack path)` is the file's text or None. None: the pack has no editions; the last edition
    when none holds."""
    if not pack.editions:
        return None
    for e in pack.editions:
        if all(_holds(text_of(path), marker) for path, marker in e.markers.items()):
            return e
    return pack.editions[-1]


def read_text(path: Path) -> str | None:
    """A marker file's text (None: absent, unreadable or too big to be a submission's source)."""
    try:
        if path.stat().st_size > MAX_MARKER_BYTES:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
