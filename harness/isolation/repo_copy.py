"""An `lm` repository into the sandbox's work folder: its Python files only, bounded, scanned.

Parent side (runs before the child starts). `scan(path, display)` is the runner's static scan of one file.

What is taken first when the bounds bite: tests/adapters.py (the course's entry point: without it nothing
can be checked), then the modules it imports, transitively (read with ast, never run), then every other
Python file breadth first. So a repository of 6,000 modules keeps its adapters and the model they import,
and what was left out is reported (`select(...).skipped`), never silently dropped.
"""
from __future__ import annotations

import ast
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..tree_walk import walk

REPO_MAX_FILES, REPO_MAX_BYTES, REPO_FILE_BYTES = 3000, 40 * 1024 * 1024, 2 * 1024 * 1024
ENTRY = Path("tests") / "adapters.py"
MAX_IMPORTED = 500        # modules followed from the adapters (each parsed once)


@dataclass
class Selection:
    files: list = field(default_factory=list)      # (path, path relative to src), in the order taken
    skipped: list = field(default_factory=list)    # what was left out and why, one line each


def _walked(src: Path):
    from ..source import SKIP_ANYWHERE, SKIP_DIRS

    def keep_dir(name, depth):      # cs336_basics/data/ is code, ./data is not
        return not name.startswith(".") and name not in (SKIP_DIRS if depth == 1 else SKIP_ANYWHERE)
    return walk(src, keep_dir=keep_dir, keep_file=lambda n: n.endswith(".py"))


def _module_files(src: Path, name: str) -> list[Path]:
    """The files of `a.b.c` under src: a/__init__.py, a/b/__init__.py, a/b/c.py or a/b/c/__init__.py."""
    parts, out = name.split("."), []
    for i in range(1, len(parts) + 1):
        base = src.joinpath(*parts[:i])
        out += [base / "__init__.py", base.with_suffix(".py")] if i == len(parts) else [base / "__init__.py"]
    return [p for p in out if p.is_file() and not p.is_symlink()]


def _imported(src: Path, start: Path) -> list[Path]:
    """Files of the repository that `start` imports, transitively, in the order met (parsed, never run)."""
    seen, order, todo = {start}, [], [start]
    while todo and len(seen) < MAX_IMPORTED:
        f = todo.pop(0)
        try:
            if f.stat().st_size > REPO_FILE_BYTES:
                continue
            tree = ast.parse(f.read_bytes())
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        rel = f.relative_to(src)
        pkg = list(rel.parts[:-1])
        names = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = (pkg[:len(pkg) - node.level + 1] if node.level else [])
                mod = ".".join(base + ([node.module] if node.module else []))
                if mod:
                    names += [mod] + [f"{mod}.{a.name}" for a in node.names if a.name != "*"]
        for name in names:
            for p in _module_files(src, name):
                if p not in seen:
                    seen.add(p)
                    order.append(p)
                    todo.append(p)
    return order


def select(src: Path) -> Selection:
    """The repository's files a check reads: its Python files (no data, no .git, no links), within the bounds
    on their number and size, the adapters and what they import first."""
    src = Path(src)
    out, taken, total = Selection(), set(), 0
    entry = src / ENTRY
    first = [entry, src / "tests" / "__init__.py"] if entry.is_file() and not entry.is_symlink() else []
    walked = _walked(src)
    out.skipped += walked.skipped
    rest = [p for p, _ in walked.files]
    too_big, over = [], 0
    for p in first + (_imported(src, entry) if first else []) + rest:
        if p in taken or p.is_symlink() or not p.is_file():
            continue
        taken.add(p)
        size = p.stat().st_size
        if size > REPO_FILE_BYTES:
            too_big.append(str(p.relative_to(src)))
            continue
        if len(out.files) >= REPO_MAX_FILES or total + size > REPO_MAX_BYTES:
            over += 1
            continue
        total += size
        out.files.append((p, p.relative_to(src)))
    if too_big:
        out.skipped.append(f"{len(too_big)} Python file(s) over {REPO_FILE_BYTES // 2**20} MB not read: "
                           + ", ".join(too_big[:5]))
    if over:
        out.skipped.append(f"{over} Python file(s) beyond the limits ({REPO_MAX_FILES} files, "
                           f"{REPO_MAX_BYTES // 2**20} MB) not read; tests/adapters.py and the modules it imports "
                           f"were taken first")
    return out


def repo_files(src: Path):
    """(path, path relative to src) of select(src)'s files."""
    yield from select(Path(src)).files


def copy_repo(src: Path, dst: Path, scan, shown: str | None = None, skipped: list | None = None) -> list[dict]:
    """Copy a repository's Python files (select) into the work folder; scan them. `skipped` hears what was left
    out."""
    static = []
    chosen = select(src)
    if skipped is not None:
        skipped += chosen.skipped
    for p, rel in chosen.files:
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
