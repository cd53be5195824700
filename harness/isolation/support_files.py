"""The instructor's extra files (`mtxdiag gradescope build --files`): checked, then copied into every run's folder.

A run's folder (runner.py) holds the submission's copy (`submission.py`, `submission.ipynb` or `repo/`) and is the
student's code's working folder in the sandbox: an extra file there is read by a relative path
(`open("vocab.txt")`, `np.load("data/x.npy")`), and a helper module there imports (the child puts the run folder
last on sys.path when the run has extra files, so it never shadows an installed module). Parent side, torch-free:
the zip's builder and the runner apply the same rules, so what the zip ships is what every run gets.

Refused: a path that is not there, a link, a name the run folder uses (RESERVED), two entries with one name, and
more than limits.SUPPORT_MB or limits.SUPPORT_FILES in all.
"""
from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from ..limits import SUPPORT_FILES, SUPPORT_MB

# what a run's folder holds besides the extra files: the submission's copy (runner.py) and the child's stack dump
RESERVED = ("submission.py", "submission.ipynb", "repo", "stack.txt")
MAX_DEPTH = 16


class SupportError(ValueError):
    """The extra files cannot be shipped or copied; the message says why."""


def _tally(total: list, size: int, where: str) -> None:
    total[0] += 1
    total[1] += size
    if total[0] > SUPPORT_FILES:
        raise SupportError(f"{where}: more than {SUPPORT_FILES} files in all (the limit for extra files)")
    if total[1] > SUPPORT_MB * 1024 * 1024:
        raise SupportError(f"{where}: more than {SUPPORT_MB} MB in all (the limit for extra files; a large data "
                           f"set belongs in setup.sh's download or the course's storage)")


def _files_under(top: Path, rel: str, total: list, out: list) -> None:
    """Every regular file under the folder `top` as (path, rel/inner path); a link or an odd entry is refused."""
    todo = [(top, rel, 0)]
    while todo:
        folder, name, depth = todo.pop()
        if depth > MAX_DEPTH:
            raise SupportError(f"{folder}: folders more than {MAX_DEPTH} levels deep")
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as err:
            raise SupportError(f"cannot read the folder {folder}: {err.strerror or err}") from None
        for entry in entries:
            st = os.lstat(entry.path)
            inner = f"{name}/{entry.name}"
            if stat.S_ISDIR(st.st_mode):
                todo.append((Path(entry.path), inner, depth + 1))
            elif stat.S_ISREG(st.st_mode):
                _tally(total, st.st_size, str(top))
                out.append((Path(entry.path), inner))
            else:
                raise SupportError(f"{entry.path} is a link or not a regular file: give the file itself")


def collect(paths) -> list[tuple[Path, str]]:
    """(path, name in the run folder) of every file the extra paths give: a file by its name, a folder as itself
    with what it holds (`data/` -> `data/...`). SupportError for what cannot be shipped."""
    out: list[tuple[Path, str]] = []
    seen: dict[str, Path] = {}
    total = [0, 0]
    for p in map(Path, paths):
        if p.is_symlink():
            raise SupportError(f"{p} is a link: give the file or folder itself")
        if not p.exists():
            raise SupportError(f"{p} does not exist")
        name = p.resolve().name
        if name in RESERVED:
            raise SupportError(f"{p}: the name {name!r} is the submission's or the grader's in the run folder "
                               f"({', '.join(RESERVED)}); rename it")
        if name in seen:
            raise SupportError(f"{p} and {seen[name]} have the same name {name!r}: each extra file or folder goes "
                               f"beside the submission under its own name")
        seen[name] = p
        if p.is_dir():
            _files_under(p, name, total, out)
        elif p.is_file():
            _tally(total, p.stat().st_size, str(p))
            out.append((p, name))
        else:
            raise SupportError(f"{p} is not a regular file or folder")
    return out


def copy_into(folder: str | Path, work: Path) -> list[str]:
    """Copy what `folder` holds (the zip's files/, as collect() checked it when the zip was built) into the run
    folder `work`, beside the submission's copy; the names copied. SupportError if it breaks the rules."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SupportError(f"the extra files' folder {folder} is not a folder")
    names = []
    for src, rel in collect(sorted(folder.iterdir())):
        dst = work.joinpath(*rel.split("/"))
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        os.chmod(dst, 0o644)
        names.append(rel)
    return names
