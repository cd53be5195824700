"""Batch grading: a folder of submissions in, a gradebook out.

Every submission goes through the same path as ``mtxdiag check``
(harness.api.check_file: its own child process with wall-clock and memory
limits), so a submission that hangs, crashes or exhausts memory gets verdict
``error`` with the reason and the batch goes on. Scores are computed here, in
the grader's process, from the validated result (harness.rubric).

Layout of OUT::

    students/<id>/result.json    the check result + "grade" + "grading" (cache key, fault, report)
    students/<id>/report.html    the HTML report (when harness.report.html is available)
    students/<id>/results.json   Gradescope's autograder results format
    grades.csv, index.html       the gradebook, rebuilt from the result files at the end of every run
    grading.log                  one line per event, appended

Resuming: result.json is written atomically as each submission finishes and
holds a cache key (sha256 of the submission's bytes, mtxdiag's version and
the options that change results). A rerun reuses every result whose key
matches, except grader faults; the score is recomputed from the cached result
when only the rubric changed.
"""
from __future__ import annotations

import concurrent.futures as cf
import datetime as _dt
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__, gradebook
from . import rubric as rubric_mod
from .api import write_json_atomic
from .runner import Limits

SUFFIXES = (".py", ".ipynb")
SKIP_DIRS = {"__pycache__", ".ipynb_checkpoints", "__MACOSX", ".git", "node_modules"}
MAX_SUBMISSION_BYTES = 20 * 1024 * 1024
LOAD_FAILURES = {"syntax-error", "definition-error", "missing-module", "missing-name", "unreadable-file",
                 "exit-during-load", "tampering"}
VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")


class GradeError(Exception):
    """Bad input (folders, rubric, scheduler): the CLI prints the message and exits with status 2."""


# --------------------------------------------------------------------------- options and discovery

@dataclass
class Options:
    assignment: str = "auto"
    seed: int = 0
    device: str = "cpu"
    quick: bool = False
    timeout_s: float = 180.0
    memory_mb: int = 6144
    jobs: int = 1
    scheduler: str | None = None
    force: bool = False
    visibility: str = "visible"
    stdout_visibility: str = "hidden"
    output_mb: float = 1.0       # more output than this is an integrity finding (output-flood)

    def result_options(self) -> dict:
        """The options that change a check's result (and so belong in the cache key)."""
        opts = {"assignment": self.assignment, "seed": self.seed, "device": self.device, "quick": self.quick}
        if self.output_mb != 1.0:     # only when changed: caches made before the option existed stay valid
            opts["output_mb"] = float(self.output_mb)
        return opts

    def limits(self) -> dict:
        threads = 1 if (self.jobs > 1 or self.scheduler) else 0
        return {"timeout_s": float(self.timeout_s), "memory_mb": int(self.memory_mb), "threads": threads,
                "output_mb": float(self.output_mb)}


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


# --------------------------------------------------------------------------- one submission (runs on a worker)

def _safe_name(name: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(name).stem)[:80] or "submission"
    return stem + (Path(name).suffix if Path(name).suffix in SUFFIXES else ".py")


def _replace_strings(obj, old: str, new: str):
    if isinstance(obj, str):
        return obj.replace(old, new) if old in obj else obj
    if isinstance(obj, list):
        return [_replace_strings(x, old, new) for x in obj]
    if isinstance(obj, dict):
        return {k: _replace_strings(v, old, new) for k, v in obj.items()}
    return obj


def grade_one(job: dict, checker=None) -> dict:
    """Check one submission from its bytes; runs in a worker thread or on a Dask worker.

    The submission's own child process (with its limits and kill) is started by
    check_file inside this call. Returns {"result", "wall_s", "host"}; raises only
    for a fault of the grader.
    """
    if checker is None:
        from .api import check_file as checker
    t0 = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="mtxdiag-grade-"))
    try:
        path = tmp / _safe_name(job["filename"])
        path.write_bytes(job["data"])
        result = checker(path, assignment=job["assignment"], seed=job["seed"], device=job["device"],
                         quick=job["quick"], limits=Limits(**job["limits"]))
        result = _replace_strings(result, str(path), job["display"])
        result = _replace_strings(result, str(tmp), str(Path(job["display"]).parent))
        return {"result": result, "wall_s": round(time.monotonic() - t0, 3), "host": socket.gethostname()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _job(sub: Submission, opts: Options) -> dict:
    return {"student": sub.student, "filename": sub.path.name, "data": sub.data, "display": str(sub.path),
            **opts.result_options(), "limits": opts.limits()}


# --------------------------------------------------------------------------- results in the parent

def synthetic_result(display: str, kind: str, reason: str, *, student_fault: bool, opts: Options) -> dict:
    """A result for what never reached a check (no file, several files) or whose grading failed here."""
    from .causes import BY_ID
    diags = []
    if not student_fault:
        c = BY_ID["grader-fault"]
        diags = [{"id": c.id, "title": c.title, "confidence": 1.0, "evidence": [reason], "fix": c.fix,
                  "location": None, "why": c.why}]
    return {"schema": 1, "harness_version": __version__, "submission": display,
            "assignment": opts.assignment if opts.assignment != "auto" else None, "quick": opts.quick,
            "verdict": "error", "diagnoses": diags, "checks": [], "skipped_code": [], "stdout": "", "stderr": "",
            "artifacts": {}, "timings": {"total_s": 0.0},
            "error": {"kind": kind, "reason": reason, "phase": None, "student_fault": student_fault}}


def looks_valid(result) -> bool:
    """The shape the engine always produces; anything else is a grader fault."""
    return (isinstance(result, dict) and result.get("verdict") in ("clean", "problems", "error")
            and isinstance(result.get("diagnoses"), list) and isinstance(result.get("checks"), list)
            and all(isinstance(d, dict) and isinstance(d.get("id"), str) for d in result["diagnoses"])
            and (result.get("error") is None or isinstance(result.get("error"), dict)))


def fault_of(result: dict) -> str:
    """Who stopped the check from running to the end: 'grader', 'student' or 'none'."""
    err = result.get("error")
    if any(d.get("id") == "tampering" for d in result.get("diagnoses", [])):
        return "student"  # a submission that interferes with the checks cannot buy itself a regrade
    if err and err.get("student_fault") is False:
        return "grader"
    if any(d.get("id") == "grader-fault" for d in result.get("diagnoses", [])):
        return "grader"
    if result.get("verdict") == "error" or any(d.get("id") in LOAD_FAILURES for d in result.get("diagnoses", [])[:1]):
        return "student"
    return "none"


def gradescope_results(result: dict, grade: dict, *, visibility: str = "visible",
                       stdout_visibility: str = "hidden", execution_time: float | None = None) -> dict:
    """Gradescope's autograder results (results.json): a top-level score and one test per finding and check."""
    score = grade["score"] if grade["score"] is not None else 0.0
    max_score = grade["max_score"]
    diags = {d["id"]: d for d in result.get("diagnoses", []) if isinstance(d, dict)}
    tests = []

    def loc_text(loc):
        if not isinstance(loc, dict):
            return ""
        if loc.get("cell"):
            return f"\nWhere: {Path(str(loc.get('file', ''))).name} cell {loc['cell']} line {loc.get('cell_line')}"
        return f"\nWhere: {Path(str(loc.get('file', ''))).name} line {loc.get('line')}"

    for item in grade["breakdown"]:
        lost = abs(float(item.get("points", 0.0)))
        d = diags.get(item["id"]) if item["kind"] in ("cause", "grader-fault") else None
        if d:
            out = "\n".join(["Evidence:"] + [f"  - {e}" for e in d.get("evidence", [])[:6]]
                            + [f"How to fix it: {d.get('fix', '')}"]) + loc_text(d.get("location"))
            name = f"{d.get('title', item['id'])} [{item['id']}]"
        else:
            out, name = item.get("title", ""), f"{item.get('title', item['id'])} [{item['id']}]"
        tests.append({"name": name[:200], "score": 0.0, "max_score": lost, "status": "failed", "output": out,
                      "visibility": visibility, "tags": [item["kind"]]})
    for d in result.get("diagnoses", []):   # findings that cost nothing (e.g. grader-fault = 0) still shown
        if not any(t["name"].endswith(f"[{d['id']}]") for t in tests):
            tests.append({"name": f"{d.get('title', d['id'])} [{d['id']}]"[:200], "score": 0.0, "max_score": 0.0,
                          "status": "failed", "output": "\n".join(str(e) for e in d.get("evidence", [])[:6]),
                          "visibility": visibility, "tags": ["cause"]})
    if result.get("verdict") == "clean":
        tests.append({"name": "No bug found by the checks", "score": float(score), "max_score": float(max_score),
                      "status": "passed", "output": "Every check passed.", "visibility": visibility,
                      "tags": ["summary"]})
    for c in result.get("checks", []):
        if not isinstance(c, dict) or c.get("status") not in ("pass", "fail", "error"):
            continue
        m = c.get("measured")
        text = f"measured: {json.dumps(m)[:300]}" + (f"\nexpected: {c['expected']}" if c.get("expected") else "") + \
               (f"\n{c['detail']}" if c.get("detail") else "")
        tests.append({"name": f"check: {c['id']}", "score": 0.0, "max_score": 0.0,
                      "status": "passed" if c["status"] == "pass" else "failed", "output": text[:4000],
                      "visibility": visibility, "tags": ["check"]})
    lines = [f"Verdict: {result.get('verdict')}    Score: {score:g} / {max_score:g}"]
    if grade["score"] is None:
        lines.append("The grader itself failed on this submission (not your code's fault). "
                     "Your instructor will regrade it; you may also resubmit.")
    err = result.get("error")
    if err and err.get("student_fault") is not False:
        lines.append(f"The check could not finish: {err.get('reason')}")
    for i, d in enumerate(result.get("diagnoses", [])[:5], start=1):
        lines.append(f"{i}. {d.get('title')} [{d.get('id')}]")
        if d.get("fix"):
            lines.append(f"   fix: {d['fix']}")
    out = {"score": float(score), "output": "\n".join(lines), "visibility": visibility,
           "stdout_visibility": stdout_visibility, "tests": tests,
           "extra_data": {"verdict": result.get("verdict"), "fault": fault_of(result),
                          "causes": [d.get("id") for d in result.get("diagnoses", [])],
                          "harness_version": __version__}}
    if execution_time is not None:
        out["execution_time"] = int(round(execution_time))
    return out


class _Log:
    """grading.log: appended, one line per event, flushed at once (an interrupted run keeps its lines)."""

    def __init__(self, path: Path | None, echo=None):
        self.f = open(path, "a", encoding="utf-8") if path else None
        self.lock = threading.Lock()
        self.echo = echo

    def __call__(self, msg: str):
        line = f"{_dt.datetime.now().isoformat(timespec='seconds')} {msg}"
        with self.lock:
            if self.f:
                self.f.write(line + "\n")
                self.f.flush()

    def close(self):
        if self.f:
            self.f.close()


class Progress:
    """done/total, failures and ETA on stderr: a \\r line on a terminal, a line per submission otherwise."""

    def __init__(self, total: int, to_grade: int, stream=None, enabled: bool = True):
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.total, self.to_grade, self.enabled = total, to_grade, enabled
        self.done, self.graded, self.failed, self.t0 = 0, 0, 0, time.monotonic()

    def eta(self) -> str:
        left = self.to_grade - self.graded
        if self.graded == 0 or left <= 0:
            return "?" if left > 0 else "0s"
        s = (time.monotonic() - self.t0) / self.graded * left
        return f"{int(s // 60)}m{int(s % 60):02d}s" if s >= 60 else f"{s:.0f}s"

    def update(self, student: str, what: str, graded: bool, failed: bool):
        self.done += 1
        self.graded += graded
        self.failed += failed
        if not self.enabled:
            return
        msg = (f"mtxdiag grade: {self.done}/{self.total} done, {self.failed} failed, "
               f"ETA {self.eta()}  ({student}: {what})")
        if self.tty:
            self.stream.write("\r\x1b[K" + msg[:200])
        else:
            self.stream.write(msg + "\n")
        self.stream.flush()

    def close(self):
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()


@dataclass
class RunSummary:
    total: int = 0
    graded: list = field(default_factory=list)        # ids checked in this run
    reused: list = field(default_factory=list)        # ids whose cached result was reused
    rescored: list = field(default_factory=list)      # cached ids whose score changed (new rubric)
    problems: list = field(default_factory=list)      # ids with nothing to grade (no or several files)
    grader_faults: list = field(default_factory=list)
    report_errors: list = field(default_factory=list)
    interrupted: bool = False
    seconds: float = 0.0
    rows: list = field(default_factory=list)

    def text(self) -> str:
        s = (f"{self.total} submissions: {len(self.graded)} graded, {len(self.reused)} reused from earlier runs"
             + (f" ({len(self.rescored)} rescored)" if self.rescored else "")
             + (f", {len(self.problems)} without a gradable file" if self.problems else "")
             + (f", {len(self.grader_faults)} grader faults (rerun to retry)" if self.grader_faults else "")
             + f" in {self.seconds:.1f} s")
        return s + (" (interrupted)" if self.interrupted else "")


class Grader:
    """One batch run over a submissions folder."""

    def __init__(self, src, out, *, options: Options | None = None, rubric=None, checker=None,
                 progress_stream=None, progress: bool = True, title: str | None = None):
        self.opts = options or Options()
        if self.opts.jobs < 1:
            raise GradeError("--jobs must be at least 1")
        if self.opts.visibility not in VISIBILITIES or self.opts.stdout_visibility not in VISIBILITIES:
            raise GradeError(f"visibility must be one of {', '.join(VISIBILITIES)}")
        self.src_arg, self.out_arg = Path(src), Path(out)
        self.src, self.out = check_folders(self.src_arg, self.out_arg)
        self.rubric = rubric if rubric is not None else rubric_mod.load()
        self.checker = checker
        self.progress_stream, self.progress_on = progress_stream, progress
        self.title = title or f"Gradebook: {self.src.name}"
        self.students = self.out / "students"
        self.log = None

    # ----- files of one student
    def _dir(self, student: str) -> Path:
        return self.students / student

    def _cached(self, sub: Submission) -> dict | None:
        if self.opts.force or sub.key is None:
            return None
        res = gradebook.read_result(self._dir(sub.student) / "result.json")
        if res is None:
            return None
        g = res.get("grading") or {}
        if g.get("key") != sub.key or g.get("fault") == "grader":
            return None
        err = res.get("error") or {}
        was, now = g.get("limits") or {}, self.opts.limits()
        if err.get("kind") == "timeout" and now["timeout_s"] > was.get("timeout_s", 0):
            return None          # it ran out of time under a lower limit: try again with more
        if err.get("kind") == "memory" and now["memory_mb"] > was.get("memory_mb", 0):
            return None
        if not looks_valid(res):
            return None
        return res

    def _write_report(self, result: dict, sub: Submission) -> dict:
        path = self._dir(sub.student) / "report.html"
        if sub.path is None:
            return {"path": None, "error": None}
        try:
            from .report import html as html_report
        except ImportError as e:
            return {"path": None, "error": f"the HTML report module is not available ({e})"}
        try:
            html_report.write(result, path, source_path=sub.path)
            return {"path": "report.html", "error": None}
        except Exception as e:  # a report must never stop the grading
            return {"path": None, "error": f"{type(e).__name__}: {e}"[:300]}

    def _commit(self, sub: Submission, result: dict, *, wall_s: float, host: str | None, graded_at: str | None,
                report: bool = True, limits: dict | None = None) -> dict:
        """Grade, write results.json and the report, then result.json last (its presence means done)."""
        grade = rubric_mod.score(result, self.rubric)
        fault = fault_of(result)
        result = dict(result)
        result["grade"] = grade
        grading = {"student": sub.student, "source": str(sub.path) if sub.path else None, "sha256": sub.sha256,
                   "key": sub.key, "harness_version": __version__, "options": self.opts.result_options(),
                   "limits": limits or self.opts.limits(), "rubric": self.rubric.name, "rubric_digest": self.rubric.digest,
                   "fault": fault, "graded_at": graded_at or _dt.datetime.now().astimezone().isoformat(
                       timespec="seconds"), "wall_s": wall_s, "host": host, "report": {"path": None, "error": None}}
        result["grading"] = grading
        d = self._dir(sub.student)
        d.mkdir(parents=True, exist_ok=True)
        write_json_atomic(gradescope_results(result, grade, visibility=self.opts.visibility,
                                             stdout_visibility=self.opts.stdout_visibility,
                                             execution_time=(result.get("timings") or {}).get("total_s")),
                          d / "results.json")
        if report:
            grading["report"] = self._write_report(result, sub)
        write_json_atomic(result, d / "result.json")
        return result

    def _reuse(self, sub: Submission, cached: dict, summary: RunSummary) -> None:
        grading = cached.get("grading") or {}
        new_grade = rubric_mod.score(cached, self.rubric)
        report_missing = self._report_missing(sub, grading)
        if new_grade != cached.get("grade") or grading.get("rubric_digest") != self.rubric.digest or report_missing:
            base = {k: v for k, v in cached.items() if k not in ("grade", "grading")}
            res = self._commit(sub, base, wall_s=grading.get("wall_s", 0.0), host=grading.get("host"),
                               graded_at=grading.get("graded_at"), limits=grading.get("limits"))
            if new_grade != cached.get("grade"):
                summary.rescored.append(sub.student)
            self._log_row("rescored" if new_grade != cached.get("grade") else "reused", sub, res)
        else:
            self._log_row("reused", sub, cached)
        summary.reused.append(sub.student)

    def _report_missing(self, sub: Submission, grading: dict) -> bool:
        """A report to (re)write: deleted since, or its module was missing then and is there now."""
        if sub.path is None or (self._dir(sub.student) / "report.html").exists():
            return False
        rep = grading.get("report") or {}
        if rep.get("path"):
            return True
        if str(rep.get("error") or "").startswith("the HTML report module is not available"):
            try:
                from .report import html  # noqa: F401
                return True
            except ImportError:
                return False
        return False

    def _log_row(self, what: str, sub: Submission, res: dict):
        g, gr = res.get("grade") or {}, res.get("grading") or {}
        causes = ";".join(d.get("id", "") for d in res.get("diagnoses", [])[:5])
        rep = (gr.get("report") or {}).get("error")
        self.log(f"{what} {sub.student} verdict={res.get('verdict')} fault={gr.get('fault')} score={g.get('score')}"
                 f"/{g.get('max_score')} seconds={(res.get('timings') or {}).get('total_s')} causes={causes or '-'}"
                 + (f" reason={gradebook.reason_of(res)!r}" if gradebook.reason_of(res) else "")
                 + (f" report-error={rep!r}" if rep else ""))

    # ----- the run
    def run(self) -> RunSummary:
        t0 = time.monotonic()
        self.out.mkdir(parents=True, exist_ok=True)
        self.students.mkdir(exist_ok=True)
        lock = _lock(self.out)
        try:
            return self._run(t0)
        finally:
            lock.close()

    def _run(self, t0: float) -> RunSummary:
        self.log = _Log(self.out / "grading.log")
        summary = RunSummary()
        subs, ignored = discover(self.src)
        summary.total = len(subs)
        self.log(f"run start: mtxdiag {__version__} src={self.src} out={self.out} options={self.opts.result_options()}"
                 f" limits={self.opts.limits()} jobs={self.opts.jobs} scheduler={self.opts.scheduler or '-'}"
                 f" force={self.opts.force} rubric={self.rubric.source} ({self.rubric.digest[:12]})"
                 f" submissions={len(subs)}" + (f" ignored={ignored}" if ignored else ""))
        todo = []
        try:
            for sub in subs:
                _read(sub, self.opts)
                if sub.problem:
                    res = synthetic_result(str(sub.path or self.src / sub.student), "no-submission", sub.problem,
                                           student_fault=sub.fault == "student", opts=self.opts)
                    res = self._commit(sub, res, wall_s=0.0, host=None, graded_at=None, report=False)
                    summary.problems.append(sub.student)
                    if sub.fault == "grader":
                        summary.grader_faults.append(sub.student)
                    self._log_row("problem", sub, res)
                    continue
                cached = self._cached(sub)
                if cached is not None:
                    self._reuse(sub, cached, summary)
                else:
                    todo.append(sub)
            progress = Progress(len(subs), len(todo), self.progress_stream, self.progress_on)
            progress.done = len(subs) - len(todo)
            if todo:
                self._grade_all(todo, summary, progress)
            progress.close()
        except KeyboardInterrupt:
            summary.interrupted = True
            self.log("run interrupted (Ctrl-C): finished results are kept; rerun to grade the rest")
            raise
        finally:
            summary.seconds = time.monotonic() - t0
            try:
                roster = [(s.student, s.key if not s.problem else None) for s in subs]
                summary.rows = gradebook.rebuild(self.out, roster, title=self.title, rubric_name=self.rubric.name,
                                                 options=self._options_text())
            except Exception as e:  # best effort after an interruption; a normal run re-raises below
                self.log(f"gradebook not rebuilt: {type(e).__name__}: {e}")
                if not summary.interrupted:
                    raise
            self.log("run end: " + summary.text())
            self.log.close()
        return summary

    def _options_text(self) -> str:
        o = self.opts
        return (f"{'quick' if o.quick else 'full'} checks, assignment {o.assignment}, seed {o.seed}, "
                f"limits {o.timeout_s:g} s / {o.memory_mb} MB")

    def _finish(self, sub: Submission, outcome: dict | None, exc: BaseException | None, summary: RunSummary,
                progress: Progress):
        if exc is None and outcome is not None and looks_valid(outcome.get("result")):
            result, wall, host = outcome["result"], outcome.get("wall_s", 0.0), outcome.get("host")
        else:
            if exc is not None:
                why = f"grading failed in the grader: {type(exc).__name__}: {exc}"
                self.log(f"grader exception for {sub.student}:\n" + "".join(
                    traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip())
            else:
                why = "the grader received a malformed result"
            result = synthetic_result(str(sub.path), "grader-fault", why[:500], student_fault=False, opts=self.opts)
            wall, host = 0.0, None
        res = self._commit(sub, result, wall_s=wall, host=host, graded_at=None)
        fault = res["grading"]["fault"]
        summary.graded.append(sub.student)
        if fault == "grader":
            summary.grader_faults.append(sub.student)
        if res["grading"]["report"].get("error"):
            summary.report_errors.append(sub.student)
        self._log_row("graded", sub, res)
        what = res["verdict"] + (f" ({', '.join(d['id'] for d in res['diagnoses'][:3])})" if res["diagnoses"] else "")
        progress.update(sub.student, what, graded=True, failed=res["verdict"] == "error")

    def _grade_all(self, todo: list[Submission], summary: RunSummary, progress: Progress):
        if self.opts.scheduler:
            self._grade_dask(todo, summary, progress)
        else:
            self._grade_local(todo, summary, progress)

    def _grade_local(self, todo, summary, progress):
        pool = cf.ThreadPoolExecutor(max_workers=self.opts.jobs, thread_name_prefix="mtxdiag-grade")
        futures = {pool.submit(grade_one, _job(s, self.opts), self.checker): s for s in todo}
        try:
            for fut in cf.as_completed(futures):
                sub = futures[fut]
                try:
                    outcome, exc = fut.result(), None
                except Exception as e:
                    outcome, exc = None, e
                self._finish(sub, outcome, exc, summary, progress)
                sub.data = None
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            _stop_children()
            raise
        pool.shutdown(wait=True)

    def _grade_dask(self, todo, summary, progress):
        try:
            from dask.distributed import Client, as_completed
        except ImportError:
            raise GradeError("--scheduler needs Dask: pip install 'dask[distributed]'") from None
        try:
            client = Client(self.opts.scheduler, timeout="20s")
        except Exception as e:
            raise GradeError(f"cannot connect to the Dask scheduler {self.opts.scheduler}: {e}") from None
        futures = {}
        try:
            for s in todo:
                f = client.submit(grade_one, _job(s, self.opts), self.checker, pure=False,
                                  key=f"mtxdiag-grade-{s.student}-{os.urandom(4).hex()}")
                futures[f] = s
            for fut in as_completed(list(futures)):
                sub = futures[fut]
                try:
                    outcome, exc = fut.result(), None
                except Exception as e:
                    outcome, exc = None, e
                self._finish(sub, outcome, exc, summary, progress)
                sub.data = None
        except BaseException:
            try:
                client.cancel(list(futures))
            except Exception:
                pass
            raise
        finally:
            client.close()


def _lock(out: Path):
    """One run at a time per output folder (two would write the same files)."""
    f = open(out / ".grading.lock", "a+")
    try:
        import fcntl
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except ImportError:
        pass
    except OSError:
        f.close()
        raise GradeError(f"another 'mtxdiag grade' is writing to {out}; wait for it to finish") from None
    return f


def _stop_children() -> None:
    """On Ctrl-C: kill the process groups of our own running check children (best effort, Linux)."""
    me = os.getpid()
    pids = set()
    try:
        for task in os.listdir(f"/proc/{me}/task"):
            try:
                pids.update(int(p) for p in Path(f"/proc/{me}/task/{task}/children").read_text().split())
            except OSError:
                continue
    except OSError:
        return
    for pid in pids:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"harness.child" in cmd:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass


def grade_folder(src, out, **kwargs) -> RunSummary:
    """Library entry point: grade every submission in `src` into `out` (see Grader for the arguments)."""
    return Grader(src, out, **kwargs).run()


# --------------------------------------------------------------------------- Gradescope: one submission

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


def gradescope_one(submission_dir, results_path, *, options: Options | None = None, rubric=None,
                   checker=None) -> dict:
    """Grade the one submission in `submission_dir`; write Gradescope's results.json; return it."""
    opts = options or Options()
    rub = rubric if rubric is not None else rubric_mod.load()
    folder = Path(submission_dir)
    path, problem = find_single(folder)
    t0 = time.monotonic()
    data = None
    if path is not None:
        try:
            data = path.read_bytes()
        except OSError as e:
            problem = f"cannot read {path.name}: {e}"
    if problem:
        result = synthetic_result(str(path or folder), "no-submission", problem, student_fault=True, opts=opts)
    else:
        sub = Submission(path.stem, path, data=data)
        try:
            outcome = grade_one(_job(sub, opts), checker)
            result = outcome["result"]
            if not looks_valid(result):
                raise ValueError("malformed result")
        except Exception as e:
            result = synthetic_result(str(path), "grader-fault", f"grading failed in the grader: "
                                      f"{type(e).__name__}: {e}", student_fault=False, opts=opts)
    grade = rubric_mod.score(result, rub)
    out = gradescope_results(result, grade, visibility=opts.visibility, stdout_visibility=opts.stdout_visibility,
                             execution_time=time.monotonic() - t0)
    write_json_atomic(out, results_path)
    result["grade"] = grade
    return {"results": out, "result": result}


__all__ = ["GradeError", "Options", "Submission", "Grader", "RunSummary", "grade_folder", "grade_one",
           "discover", "cache_key", "gradescope_results", "gradescope_one", "fault_of", "synthetic_result"]
