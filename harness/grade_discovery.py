"""Grading, part 1: the options of a run, and what to grade in a folder (a file or a folder per student).

A submission is a .py/.ipynb file in the folder, or a folder holding exactly one such file; the student id
is the file's stem or the folder's name. Each one is read once, here, and keyed by its bytes' sha256, the
harness version and the options that change results (the cache key of a resumable run).
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from .limits import LOAD_TIMEOUT_S, MEMORY_MB, OUTPUT_MB, TIMEOUT_S

SUFFIXES = (".py", ".ipynb")
SKIP_DIRS = {"__pycache__", ".ipynb_checkpoints", "__MACOSX", ".git", "node_modules"}
MAX_SUBMISSION_BYTES = 20 * 1024 * 1024


class GradeError(Exception):
    """Bad input (folders, rubric, scheduler): the CLI prints the message and exits with status 2."""


@dataclass
class Options:
    assignment: str = "auto"
    seed: int = 0
    device: str = "cpu"
    quick: bool = False
    timeout_s: float = TIMEOUT_S          # every default: harness/limits.py
    memory_mb: int = MEMORY_MB
    jobs: int = 1
    scheduler: str | None = None
    force: bool = False
    visibility: str = "visible"
    stdout_visibility: str = "hidden"
    output_mb: float = OUTPUT_MB       # more output than this is an integrity finding (output-flood)
    load_timeout_s: float = LOAD_TIMEOUT_S  # loading (definitions only) that runs longer ends as `timeout` during load
    warm: bool = False           # checks run as forks of warm workers (warm.py): `grade` turns it on

    def result_options(self) -> dict:
        """The options that change a check's result (and so belong in the cache key)."""
        opts = {"assignment": self.assignment, "seed": self.seed, "device": self.device, "quick": self.quick}
        if self.output_mb != OUTPUT_MB:     # only when changed: caches made before the option existed stay valid
            opts["output_mb"] = float(self.output_mb)
        return opts

    def limits(self) -> dict:
        threads = 1 if (self.jobs > 1 or self.scheduler) else 0
        # a spare core per job (not with Dask: its workers' threads decide): the training probes run beside
        cores = 2 if not self.scheduler and 2 * self.jobs <= (os.cpu_count() or 1) else 1
        return {"timeout_s": float(self.timeout_s), "memory_mb": int(self.memory_mb), "threads": threads,
                "output_mb": float(self.output_mb), "load_timeout_s": float(self.load_timeout_s), "cores": cores,
                "warm": bool(self.warm and self.device == "cpu")}


@dataclass
class Submission:
    student: str
    path: Path | None            # the file to grade, None when the entry itself is the problem
    problem: str | None = None   # why there is nothing to grade (no file, several files, unreadable...)
    fault: str = "student"       # whose problem it is, when there is one
    data: bytes | None = field(default=None, repr=False)
    sha256: str | None = None
    key: str | None = None


def _is_hidden(name: str) -> bool:
    return name.startswith(".") or name.startswith("~")


def _candidates(folder: Path) -> list[Path]:
    """The .py/.ipynb files in a student's folder, at any depth, not following links, skipping junk."""
    found = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not _is_hidden(d) and d not in SKIP_DIRS)
        for f in sorted(files):
            p = Path(root) / f
            if not _is_hidden(f) and p.suffix in SUFFIXES and not p.is_symlink():
                found.append(p)
    return found


def discover(src: Path) -> tuple[list[Submission], list[str]]:
    """(submissions, names ignored) of a submissions folder; ids are file stems or folder names."""
    subs, ignored = [], []
    for child in sorted(src.iterdir(), key=lambda p: p.name):
        if _is_hidden(child.name) or child.name in SKIP_DIRS:
            continue
        if child.is_symlink():
            if child.suffix in SUFFIXES or child.is_dir():
                subs.append(Submission(child.name, None, f"{child.name} is a symbolic link; links are not followed"))
            else:
                ignored.append(child.name)
        elif child.is_dir():
            cands = _candidates(child)
            if len(cands) == 1:
                subs.append(Submission(child.name, cands[0]))
            elif not cands:
                subs.append(Submission(child.name, None, f"the folder {child.name}/ has no .py or .ipynb file"))
            else:
                names = ", ".join(str(p.relative_to(child)) for p in cands[:6]) + (" ..." if len(cands) > 6 else "")
                subs.append(Submission(child.name, None, f"the folder {child.name}/ has {len(cands)} .py/.ipynb "
                                                         f"files ({names}); it must hold exactly one"))
        elif child.is_file() and child.suffix in SUFFIXES:
            subs.append(Submission(child.stem, child))
        else:
            ignored.append(child.name)
    # alice.py and alice.ipynb (or alice/ and alice.py): keep both, named by their full names
    counts: dict[str, int] = {}
    for s in subs:
        counts[s.student] = counts.get(s.student, 0) + 1
    for s in subs:
        if counts[s.student] > 1 and s.path is not None and s.path.parent == src:
            s.student = s.path.name
    return subs, ignored


def check_folders(src: Path, out: Path) -> tuple[Path, Path]:
    """Refuse anything that could write among the students' files."""
    if not src.exists():
        raise GradeError(f"no such folder: {src}")
    if not src.is_dir():
        raise GradeError(f"{src} is not a folder (give the folder that holds the submissions)")
    s, o = src.resolve(), out.resolve()
    if o == s or s in o.parents:
        raise GradeError(f"the output folder {out} is inside the submissions folder {src}; choose an output "
                         f"folder outside it (the grader never writes among the students' files)")
    if o in s.parents:
        raise GradeError(f"the submissions folder {src} is inside the output folder {out}; choose an output "
                         f"folder that does not contain the submissions")
    if o.exists() and not o.is_dir():
        raise GradeError(f"the output {out} exists and is not a folder")
    return s, o


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cache_key(sha256: str, opts: Options) -> str:
    blob = json.dumps({"sha256": sha256, "harness": __version__, **opts.result_options()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _read(sub: Submission, opts: Options) -> None:
    """Read the bytes once: what is hashed is exactly what is graded."""
    if sub.path is None:
        return
    try:
        size = sub.path.stat().st_size
        if size > MAX_SUBMISSION_BYTES:
            sub.problem = f"{sub.path.name} is {size / 2**20:.0f} MB; the limit is {MAX_SUBMISSION_BYTES // 2**20} MB"
            return
        sub.data = sub.path.read_bytes()
    except OSError as e:
        sub.problem, sub.fault = f"cannot read {sub.path}: {e.strerror or e}", "grader"
        return
    sub.sha256 = _sha256(sub.data)
    sub.key = cache_key(sub.sha256, opts)


def find_single(folder: Path) -> tuple[Path | None, str | None]:
    """The one .py/.ipynb in Gradescope's submission folder, or why there is not exactly one."""
    if not folder.is_dir():
        raise GradeError(f"the submission folder {folder} does not exist")
    cands = _candidates(folder)
    if len(cands) == 1:
        return cands[0], None
    if not cands:
        return None, "no .py or .ipynb file was submitted"
    names = ", ".join(str(p.relative_to(folder)) for p in cands[:6])
    return None, f"{len(cands)} .py/.ipynb files were submitted ({names}); submit exactly one"
