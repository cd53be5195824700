"""Grading, part 1: the options of a run, and what to grade in a folder (a file or a folder per student).

A submission is a .py/.ipynb file in the folder, or a folder holding exactly one such file, or a folder
holding one `lm` repository (a folder with tests/adapters.py, at any depth: its Python files are the
submission, read as repo_copy.select reads them). The student id is the file's stem or the folder's name.
Each one is read once, here, and keyed by its bytes' sha256 (a repository: of its files' paths and bytes),
the harness version and the options that change results (the cache key of a resumable run).

A student's folder is searched with a bounded walk (tree_walk: breadth first, no recursion, depth and
entry limits); what a limit left out is reported on that submission, and anything that goes wrong while
searching one student's folder is that student's problem row, never the batch's.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..readable import cut
from .. import __version__
from ..assignments import AUTO, REPOSITORY, detect_pack, folder_pack_of, for_folder
from ..limits import LOAD_TIMEOUT_S, MEMORY_MB, OUTPUT_MB, TIMEOUT_S

SUFFIXES = (".py", ".ipynb")
SKIP_DIRS = {"__pycache__", ".ipynb_checkpoints", "__MACOSX", ".git", "node_modules"}
MAX_SUBMISSION_BYTES = 20 * 1024 * 1024
MAX_REPO_BYTES = 40 * 1024 * 1024           # a repository's Python files, together (repo_copy's bound)


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
    visibility: str = ""         # the tests' visibility the rubric's [visibility] does not set ("": its default)
    stdout_visibility: str = "hidden"
    output_mb: float = OUTPUT_MB       # more output than this is an integrity finding (output-flood)
    load_timeout_s: float = LOAD_TIMEOUT_S  # loading (definitions only) that runs longer ends as `timeout` during load
    warm: bool = False           # checks run as forks of warm workers (warm.py): `grade` turns it on
    hint: str = ""               # gradescope: cause | line | patch (repair/show.py); "" = the rubric's, else line
    support: str = ""            # gradescope: the zip's extra files (build --files), copied beside each submission

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
    repo: bool = False           # path is an `lm` repository's root (it holds tests/adapters.py) or a pack's folder
    pack: str = ""               # the pack whose assignment folder path is (assignments.detect_pack)
    files: dict | None = field(default=None, repr=False)   # a repository's files: relative path -> bytes
    left_out: list = field(default_factory=list)           # what the bounded search or copy did not read


def _is_hidden(name: str) -> bool:
    return name.startswith(".") or name.startswith("~")


def _search(folder: Path):
    """(the .py/.ipynb files, the repository roots, what was left out) of a student's folder: bounded, no links."""
    from ..tree_walk import walk
    w = walk(folder, keep_dir=lambda name, depth: not _is_hidden(name) and name not in SKIP_DIRS,
             keep_file=lambda name: not _is_hidden(name) and Path(name).suffix in SUFFIXES)
    files = [p for p, _ in w.files]
    repos = sorted({p.parent.parent for p in files if p.name == "adapters.py" and p.parent.name == "tests"},
                   key=lambda p: (len(p.parts), str(p)))
    return files, repos, w.skipped


def _listing(paths, base: Path) -> str:
    return ", ".join(str(p.relative_to(base)) or "." for p in paths[:6]) + (" ..." if len(paths) > 6 else "")


def _in_folder(folder: Path, student: str, shown: str) -> Submission:
    """The submission in one student's folder, or the problem row that says why there is none."""
    files, repos, left = _search(folder)
    note = f" (not searched: {'; '.join(left)})" if left else ""
    if len(repos) == 1:
        return Submission(student, repos[0], repo=True, left_out=list(left))
    if len(repos) > 1:
        return Submission(student, None, f"{shown} holds {len(repos)} repositories with tests/adapters.py "
                                         f"({_listing(repos, folder)}); it must hold one")
    pack = detect_pack(folder)
    if pack:                    # a pack's assignment folder (its files, in one of its layouts)
        return Submission(student, folder, repo=True, pack=pack, left_out=list(left))
    if len(files) == 1:
        return Submission(student, files[0], left_out=list(left))
    if not files:
        return Submission(student, None, f"{shown} has no .py or .ipynb file{note}")
    return Submission(student, None, f"{shown} has {len(files)} .py/.ipynb files ({_listing(files, folder)}); it "
                                     f"must hold exactly one, or one repository with tests/adapters.py")


def _entry(src: Path, child: Path) -> Submission | None:
    if child.is_symlink():
        if child.suffix in SUFFIXES or child.is_dir():
            return Submission(child.name, None, f"{child.name} is a symbolic link; links are not followed")
        return None
    if child.is_dir():
        return _in_folder(child, child.name, f"the folder {child.name}/")
    if child.is_file() and child.suffix in SUFFIXES:
        return Submission(child.stem, child)
    return None


def discover(src: Path) -> tuple[list[Submission], list[str]]:
    """(submissions, names ignored) of a submissions folder; ids are file stems or folder names, or for a
    Gradescope or Canvas bulk download the students' ids from its metadata (exports.py)."""
    from .exports import METADATA, canvas_groups, gradescope_ids
    try:
        ids = gradescope_ids(src)
    except ValueError as e:
        raise GradeError(f"{src} looks like a Gradescope export, but {e}") from e
    canvas = canvas_groups(src, SUFFIXES) if ids is None else None
    subs: list[Submission] = []
    ignored: list[str] = []
    if canvas is not None:
        for student, files in sorted(canvas.items()):
            subs.append(Submission(student, files[0]) if len(files) == 1 else Submission(
                student, None, f"{len(files)} .py/.ipynb files ({_listing(files, src)}); a submission is exactly one"))
        return subs, ignored
    for child in sorted(src.iterdir(), key=lambda p: p.name):
        if _is_hidden(child.name) or child.name in SKIP_DIRS or (ids is not None and child.name == METADATA):
            continue
        sub: Submission | None
        try:
            if ids is not None and child.name in ids and child.is_dir() and not child.is_symlink():
                sub = _in_folder(child, ids[child.name], f"the folder {child.name}/")
            else:
                sub = _entry(src, child)
        except Exception as e:     # one student's folder never stops the batch: it is that student's row
            sub = Submission(child.stem if child.suffix in SUFFIXES else child.name, None,
                             cut(f"could not search {child.name}: {type(e).__name__}: {e}", 500),
                             fault="grader" if isinstance(e, OSError) else "student")
        if sub is None:
            ignored.append(child.name)
        else:
            subs.append(sub)
    # alice.py and alice.ipynb (or alice/ and alice.py): keep both, named by their full names
    counts: dict[str, int] = {}
    for s in subs:
        counts[s.student] = counts.get(s.student, 0) + 1
    for s in subs:
        if counts[s.student] > 1 and s.path is not None and s.path.parent == src and not s.repo:
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
    if sub.repo:
        return _read_repo(sub, sub.path, opts)
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


def _read_repo(sub: Submission, path: Path, opts: Options) -> None:
    """A repository's files, as a check copies them (repo_copy.select: the adapters and what they import
    first), keyed by their paths and bytes."""
    from ..isolation.repo_copy import ENTRY, select
    if sub.pack:
        return _read_pack(sub, path, opts)
    if for_folder(opts.assignment) is None:
        sub.problem = (f"{path.name}/ is a repository (tests/adapters.py): only assignment {', '.join(REPOSITORY)} "
                       f"is graded from a repository, and this run grades {opts.assignment}")
        return
    try:
        chosen = select(path)
        files = {rel.as_posix(): p.read_bytes() for p, rel in chosen.files}
    except OSError as e:
        sub.problem, sub.fault = f"cannot read {path}: {e.strerror or e}", "grader"
        return
    sub.left_out += chosen.skipped
    if ENTRY.as_posix() not in files:
        sub.problem = f"{path.name}/tests/adapters.py could not be read ({'; '.join(chosen.skipped)[:300]})"
        return
    total = sum(len(b) for b in files.values())
    if total > MAX_REPO_BYTES:
        sub.problem = f"the repository's Python files are {total / 2**20:.0f} MB; the limit is {MAX_REPO_BYTES // 2**20} MB"
        return
    sub.files = files
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(json.dumps([rel, _sha256(files[rel])]).encode())
    sub.sha256 = h.hexdigest()
    sub.key = cache_key(sub.sha256, opts)


def _read_pack(sub: Submission, path: Path, opts: Options) -> None:
    """A pack's assignment folder: its files in the pack's layout (pack_copy.chosen), keyed by paths and bytes."""
    from ..isolation.pack_copy import chosen
    if opts.assignment not in (AUTO, sub.pack):
        files, _, _ = _search(path)
        if len(files) == 1:         # one file that a pack's flat layout also fits: graded as the run asks
            sub.repo, sub.pack, sub.path = False, "", files[0]
            return _read(sub, opts)
        sub.problem = f"{path.name}/ is an assignment folder of {sub.pack}, and this run grades {opts.assignment}"
        return
    pack = folder_pack_of(sub.pack)
    try:
        files = {rel.as_posix(): p.read_bytes() for p, rel in chosen(pack, path, sub.left_out)} if pack else {}
    except OSError as e:
        sub.problem, sub.fault = f"cannot read {path}: {e.strerror or e}", "grader"
        return
    total = sum(len(b) for b in files.values())
    if total > MAX_REPO_BYTES:
        sub.problem = f"the folder's Python files are {total / 2**20:.0f} MB; the limit is {MAX_REPO_BYTES // 2**20} MB"
        return
    sub.files = files
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(json.dumps([rel, _sha256(files[rel])]).encode())
    sub.sha256 = h.hexdigest()
    sub.key = cache_key(sub.sha256, opts)


def submission_in(folder: Path) -> Submission:
    """Gradescope's one submission (a file or a repository) as a Submission, or its problem row."""
    if not folder.is_dir():
        raise GradeError(f"the submission folder {folder} does not exist")
    try:
        return _in_folder(folder, "submission", "the submission")
    except Exception as e:         # noqa: BLE001 - the results must still be written
        return Submission("submission", None, cut(f"could not search the submission: {type(e).__name__}: {e}", 500),
                          fault="grader" if isinstance(e, OSError) else "student")
