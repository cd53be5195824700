"""Grading, part 2: one submission's check (runs on a worker, local or Dask) and reading its result.

`grade_one` is what a worker runs: the same path as `mtxdiag check` (harness.api.check_file, its own child
process with the limits). Everything else here runs in the grading process: a synthetic result when there
is nothing to check or the grader failed, the shape every result must have, and whose fault a failure is.
"""
from __future__ import annotations

import re
import shutil
import socket
import tempfile
import time
from pathlib import Path

from .. import __version__
from ..assignments import AUTO, for_folder
from ..engine import for_instructor
from .discovery import SUFFIXES, Options, Submission
from ..runner import Limits

LOAD_FAILURES = {"syntax-error", "definition-error", "missing-module", "missing-name", "unreadable-file",
                 "exit-during-load", "tampering"}


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
        from ..api import check_file as checker
    t0 = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="mtxdiag-grade-"))
    try:
        if job.get("files") is not None:      # an lm repository: its files under a folder of the same name
            path = tmp / (re.sub(r"[^A-Za-z0-9_.-]", "_", job["filename"])[:80] or "repo")
            _write_files(path, job["files"])
        else:
            path = tmp / _safe_name(job["filename"])
            path.write_bytes(job["data"])
        extra = {"support": job["support"]} if job.get("support") else {}     # gradescope build --files
        result = checker(path, assignment=job["assignment"], seed=job["seed"], device=job["device"],
                         quick=job["quick"], limits=Limits(**job["limits"]), **extra)
        result = for_instructor(result)       # the grader's own environment: the instructor's to fix
        result = _replace_strings(result, str(path), job["display"])
        result = _replace_strings(result, str(tmp), str(Path(job["display"]).parent))
        out = {"result": result, "wall_s": round(time.monotonic() - t0, 3), "host": socket.gethostname()}
        if job.get("render") and path.exists():
            out["report_html"] = _render(result, path, job["display"])
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _write_files(root: Path, files: dict) -> None:
    """A repository's files under root; a path that would leave root (absolute, '..') is a grader fault."""
    for rel, data in files.items():
        parts = Path(rel).parts
        if not parts or Path(rel).is_absolute() or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"a repository file path that is not relative to it: {rel!r}")
        dst = root.joinpath(*parts)
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(data)


def _render(result: dict, copy: Path, display: str) -> str | None:
    """The student's HTML report, rendered where the check ran (a Dask worker: the grading process then only
    writes it). The source lines come from this copy of the same bytes; its path never shows."""
    import html

    from ..report import html as html_report
    try:
        return html_report.render(result, source_path=copy).replace(str(copy), html.escape(display))
    except Exception:          # the grading process renders it then, as for a local job
        return None


def display_path(sub: Submission) -> str:
    """The submission's path as the student knows it: relative to the student's own folder (`model.py`,
    `src/model.py`), never the instructor's absolute path (results and reports are handed to students)."""
    path = _file(sub)
    parts = path.parts
    inside = [i for i, p in enumerate(parts[:-1]) if p == sub.student]
    return "/".join(parts[inside[-1] + 1:]) if inside else path.name


def _file(sub: Submission) -> Path:
    """The file (or repository) to grade: a submission with a problem has none and never reaches a job."""
    if sub.path is None:
        raise ValueError(f"{sub.student} has nothing to grade: {sub.problem}")
    return sub.path


def _job(sub: Submission, opts: Options) -> dict:
    job = {"student": sub.student, "filename": _file(sub).name, "data": sub.data, "display": display_path(sub),
           **opts.result_options(), "limits": opts.limits()}
    if sub.repo:
        job.update(files=sub.files, assignment=sub.pack or for_folder(AUTO))     # its pack's, or the repository one
    if opts.support:
        job["support"] = opts.support
    return job


def synthetic_result(display: str, kind: str, reason: str, *, student_fault: bool, opts: Options) -> dict:
    """A result for what never reached a check (no file, several files) or whose grading failed here."""
    from ..causes import BY_ID
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
