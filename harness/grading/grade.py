"""Batch grading: a folder of submissions in, a gradebook out.

Every submission goes through the same path as ``mtxdiag check``
(harness.api.check_file: its own child process with wall-clock and memory
limits), so a submission that hangs, crashes or exhausts memory gets verdict
``error`` with the reason and the batch goes on. Scores are computed here, in
the grader's process, from the validated result (harness.grading.rubric).

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

The run is split by concern: grade_discovery (options, what to grade), grade_results (one check on a
worker, reading results), grade_workers (local and Dask), grade_progress (progress, log, summary) and
gradescope (Gradescope's format and its one-submission run). This module is the grader that ties them
together, and the names callers import.
"""
from __future__ import annotations

import datetime as _dt
import os
import time
import traceback
from pathlib import Path

from ..readable import cut
from .. import __version__
from . import gradebook
from . import rubric as rubric_mod
from ..api import write_json_atomic
from .discovery import GradeError, Options, Submission, cache_key, check_folders, discover, _read
from .progress import Progress, RunSummary, _Log
from .results import display_path, fault_of, grade_one, looks_valid, synthetic_result
from .workers import grade_all
from .gradescope import VISIBILITIES, gradescope_one, gradescope_results  # noqa: F401
from .visibility import fallback


class Grader:
    """One batch run over a submissions folder."""

    def __init__(self, src, out, *, options: Options | None = None, rubric=None, checker=None,
                 progress_stream=None, progress: bool = True, title: str | None = None):
        self.opts = options or Options()
        if self.opts.jobs < 1:
            raise GradeError("--jobs must be at least 1")
        if self.opts.visibility not in VISIBILITIES + ("",) or self.opts.stdout_visibility not in VISIBILITIES:
            raise GradeError(f"visibility must be one of {', '.join(VISIBILITIES)}")
        self.src_arg, self.out_arg = Path(src), Path(out)
        self.src, self.out = check_folders(self.src_arg, self.out_arg)
        self.rubric = rubric if rubric is not None else rubric_mod.load()
        self.checker = checker
        self.progress_stream, self.progress_on = progress_stream, progress
        self.title = title or f"Gradebook: {self.src.name}"
        self.students = self.out / "students"
        self.log = _Log(None)          # writes nothing: run() opens grading.log in the output folder it makes

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
        load_timed_out = any(d.get("id") == "timeout" and "load limit" in " ".join(d.get("evidence") or [])
                             for d in res.get("diagnoses") or [])
        if load_timed_out and now["load_timeout_s"] > was.get("load_timeout_s", 30.0):
            return None          # its loading ran out of time under a lower load limit
        if err.get("kind") == "memory" and now["memory_mb"] > was.get("memory_mb", 0):
            return None
        if not looks_valid(res):
            return None
        return res

    def _write_report(self, result: dict, sub: Submission, text: str | None = None) -> dict:
        """report.html: the text a worker rendered (grade_results._render), or rendered here."""
        path = self._dir(sub.student) / "report.html"
        if sub.path is None:
            return {"path": None, "error": None}
        try:
            from ..report import html as html_report
        except ImportError as e:
            return {"path": None, "error": f"the HTML report module is not available ({e})"}
        try:
            if not isinstance(text, str):          # the source is read from the instructor's copy; its path never shows
                import html as _html
                text = html_report.render(result, source_path=sub.path)
                for p in (str(sub.path), _html.escape(str(sub.path))):
                    text = text.replace(p, _html.escape(display_path(sub)))
            html_report.write(result, path, source_path=sub.path, text=text)
            return {"path": "report.html", "error": None}
        except Exception as e:  # a report must never stop the grading
            return {"path": None, "error": cut(f"{type(e).__name__}: {e}", 300)}

    def _commit(self, sub: Submission, result: dict, *, wall_s: float, host: str | None, graded_at: str | None,
                report: bool = True, limits: dict | None = None, report_html: str | None = None) -> dict:
        """Grade, write results.json and the report, then result.json last (its presence means done)."""
        result = dict(result)
        if sub.left_out:      # what the bounded search left out, written here (the check never saw it)
            from ..runner import files_check
            result["checks"] = [files_check(sub.left_out)] + [c for c in result.get("checks") or []
                                                             if c.get("id") != "submission-files"]
        grade = rubric_mod.score(result, self.rubric)
        fault = fault_of(result)
        result["grade"] = grade
        grading = {"student": sub.student, "source": str(sub.path) if sub.path else None, "sha256": sub.sha256,
                   "key": sub.key, "harness_version": __version__, "options": self.opts.result_options(),
                   "limits": limits or self.opts.limits(), "rubric": self.rubric.name, "rubric_digest": self.rubric.digest,
                   "fault": fault, "graded_at": graded_at or _dt.datetime.now().astimezone().isoformat(
                       timespec="seconds"), "wall_s": wall_s, "host": host, "report": {"path": None, "error": None}}
        result["grading"] = grading
        d = self._dir(sub.student)
        d.mkdir(parents=True, exist_ok=True)
        write_json_atomic(gradescope_results(result, grade, visibility=fallback(self.opts.visibility,
                                                                                self.rubric.visibility),
                                             visibilities=self.rubric.visibility,
                                             stdout_visibility=self.opts.stdout_visibility,
                                             execution_time=(result.get("timings") or {}).get("total_s"),
                                             hint=self.opts.hint or self.rubric.hint_level or "line"),
                          d / "results.json")
        if report:
            grading["report"] = self._write_report(result, sub, report_html)
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
                from ..report import html  # noqa: F401
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
            _unlock(lock, self.out)

    def _run(self, t0: float) -> RunSummary:
        self.log = _Log(self.out / "grading.log")
        summary = RunSummary()
        progress = Progress(0, 0, self.progress_stream, self.progress_on, jobs=self.opts.jobs)
        progress.announce(f"looking for submissions in {self.src}")
        subs, ignored = discover(self.src)
        summary.total = len(subs)
        self.log(f"run start: mtxdiag {__version__} src={self.src} out={self.out} options={self.opts.result_options()}"
                 f" limits={self.opts.limits()} jobs={self.opts.jobs} scheduler={self.opts.scheduler or '-'}"
                 f" force={self.opts.force} rubric={self.rubric.source} ({self.rubric.digest[:12]})"
                 f" submissions={len(subs)}" + (f" ignored={ignored}" if ignored else ""))
        todo = []
        try:
            for sub in subs:
                try:
                    _read(sub, self.opts)
                except Exception as e:     # one student's files never stop the batch: that student's row
                    sub.problem = cut(f"could not read the submission: {type(e).__name__}: {e}", 500)
                    sub.fault = "grader" if isinstance(e, OSError) else "student"
                if sub.left_out:
                    self.log(f"left out of {sub.student}: " + cut("; ".join(sub.left_out), 1000))
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
            progress.set_totals(len(subs), len(todo))
            progress.announce(f"found {len(subs)} submissions: {len(todo)} to check, {len(summary.reused)} reused "
                              f"from earlier runs, {len(summary.problems)} without a gradable file")
            if todo:
                progress.announce(f"starting {min(self.opts.jobs, len(todo))} worker(s)" +
                                  (f" on {self.opts.scheduler}" if self.opts.scheduler else ""))
                grade_all(self, todo, summary, progress)
            progress.close()
        except KeyboardInterrupt:
            progress.close()
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
            text = outcome.get("report_html")
        else:
            text = None
            if exc is not None:
                why = f"grading failed in the grader: {type(exc).__name__}: {exc}"
                self.log(f"grader exception for {sub.student}:\n" + "".join(
                    traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip())
            else:
                why = "the grader received a malformed result"
            result = synthetic_result(str(sub.path), "grader-fault", cut(why, 500), student_fault=False, opts=self.opts)
            wall, host = 0.0, None
        res = self._commit(sub, result, wall_s=wall, host=host, graded_at=None, report_html=text)
        fault = res["grading"]["fault"]
        summary.graded.append(sub.student)
        if fault == "grader":
            summary.grader_faults.append(sub.student)
        if res["grading"]["report"].get("error"):
            summary.report_errors.append(sub.student)
        self._log_row("graded", sub, res)
        what = res["verdict"] + (f" ({', '.join(d['id'] for d in res['diagnoses'][:3])})" if res["diagnoses"] else "")
        progress.update(sub.student, what, graded=True, failed=res["verdict"] == "error", seconds=wall or None)


def _lock(out: Path):
    """One run at a time per output folder (two would write the same files). The lock file is removed when the
    run ends (`_unlock`); a run that locked a file another run had just removed tries again on the new one."""
    path = out / ".grading.lock"
    for _ in range(50):
        f = open(path, "a+")
        try:
            import fcntl
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:
            return f
        except OSError:
            f.close()
            raise GradeError(f"another 'mtxdiag grade' is writing to {out}; wait for it to finish") from None
        try:
            if os.stat(path).st_ino == os.fstat(f.fileno()).st_ino:
                return f
        except FileNotFoundError:
            pass
        f.close()                       # the file was removed by the run that held it: lock the new one
    raise GradeError(f"cannot lock {path}")


def _unlock(f, out: Path):
    try:
        (out / ".grading.lock").unlink()      # while still holding it: see _lock
    except OSError:
        pass
    f.close()


def grade_folder(src, out, **kwargs) -> RunSummary:
    """Library entry point: grade every submission in `src` into `out` (see Grader for the arguments)."""
    return Grader(src, out, **kwargs).run()


__all__ = ["GradeError", "Options", "Submission", "Grader", "RunSummary", "grade_folder", "grade_one",
           "discover", "cache_key", "gradescope_results", "gradescope_one", "fault_of", "synthetic_result"]
