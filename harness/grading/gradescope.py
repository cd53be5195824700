"""Grading, part 3: Gradescope. Its results.json for one result, and the autograder's one-submission run.

Each diagnosed cause becomes a failed test worth the points it costs, a clean submission one passed test
worth the full score, and every check a 0-point test.
"""
from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

from ..readable import cut
from .. import __version__
from . import rubric as rubric_mod
from . import visibility as vis
from ..api import write_json_atomic
from ..assignments import assignment_of, folder_pack_of
from .discovery import GradeError, Options, _read, submission_in
from .results import fault_of, grade_one, looks_valid, synthetic_result, _job

VISIBILITIES = vis.VALUES
_SURROGATE = re.compile("[\ud800-\udfff]")


def json_safe(obj):
    """A copy that strict JSON can hold, as Gradescope reads it: an unpaired surrogate (text decoded from the
    student's bytes) becomes U+FFFD, a NaN or infinite number null (gradescope_schema.py checks the file)."""
    if isinstance(obj, str):
        return _SURROGATE.sub("\ufffd", obj)
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {json_safe(k) if isinstance(k, str) else k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def gradescope_results(result: dict, grade: dict, *, visibility: str = "visible",
                       stdout_visibility: str = "hidden", execution_time: float | None = None,
                       hint: str = "line", visibilities: dict | None = None) -> dict:
    """Gradescope's autograder results (results.json): a top-level score and one test per finding and check.
    `hint` (repair/show.py): "cause" leaves the line out, "patch" adds a verified repair's diff. The grade's
    maximum is extra_data.max_score (Gradescope takes its own from the assignment's settings). `visibilities`:
    the rubric's [visibility] table (visibility.py), each test's own; `visibility`: a test's it does not set."""
    return json_safe(_results(result, grade, visibility=visibility, stdout_visibility=stdout_visibility,
                              execution_time=execution_time, hint=hint, table=visibilities or {}))


def _results(result: dict, grade: dict, *, visibility: str, stdout_visibility: str,
             execution_time: float | None, hint: str, table: dict) -> dict:
    from ..repair.show import hint_text, redact_lines

    def shown(kind: str, key: str = "") -> str:
        return vis.of(table, kind, key, visibility)
    score = grade["score"] if grade["score"] is not None else 0.0
    max_score = grade["max_score"]
    diags = {d["id"]: d for d in result.get("diagnoses", []) if isinstance(d, dict)}
    tests = []
    if assignment_of(result.get("assignment")).per_component and result.get("verdict") != "error" and \
            grade.get("components"):
        from .rubric_lm import gradescope_tests      # one test per component, its diagnosis as markdown
        from . import rubric_pack
        pack = folder_pack_of(result.get("assignment"))
        return {"score": score, "output": f"mtxdiag: {result.get('verdict')}",
                "tests": rubric_pack.gradescope_tests(result, grade, pack, visibility=visibility, table=table)
                if pack is not None else gradescope_tests(result, grade, visibility=visibility, table=table),
                "stdout_visibility": stdout_visibility,
                "extra_data": {"verdict": result.get("verdict"), "max_score": max_score, "fault": fault_of(result),
                               "causes": [d.get("id") for d in result.get("diagnoses", [])],
                               "harness_version": __version__},
                **({"execution_time": round(execution_time, 1)} if execution_time is not None else {})}

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
                            + [f"How to fix it: {d.get('fix', '')}"]) + \
                ("" if hint == "cause" else loc_text(d.get("location"))) + \
                "".join("\n" + ln for ln in hint_text(d, hint))
            name = f"{d.get('title', item['id'])} [{item['id']}]"
        else:
            out, name = item.get("title", ""), f"{item.get('title', item['id'])} [{item['id']}]"
        out = redact_lines(out) if hint == "cause" else out
        kind = {"cause": "cause", "check": "check"}.get(item["kind"], "overall")    # error, grader-fault: overall
        tests.append({"name": cut(name, 200), "score": 0.0, "max_score": lost, "status": "failed", "output": out,
                      "visibility": shown(kind, item["id"]), "tags": [item["kind"]]})
    for d in result.get("diagnoses", []):   # findings that cost nothing (e.g. grader-fault = 0) still shown
        if not any(t["name"].endswith(f"[{d['id']}]") for t in tests):
            tests.append({"name": cut(f"{d.get('title', d['id'])} [{d['id']}]", 200), "score": 0.0, "max_score": 0.0,
                          "status": "failed", "output": "\n".join(str(e) for e in d.get("evidence", [])[:6]),
                          "visibility": shown("cause", d["id"]), "tags": ["cause"]})
    if result.get("verdict") == "clean":
        tests.append({"name": "No bug found by the checks", "score": float(score), "max_score": float(max_score),
                      "status": "passed", "output": "Every check passed.", "visibility": shown("overall"),
                      "tags": ["summary"]})
    for c in result.get("checks", []):
        if not isinstance(c, dict) or c.get("status") not in ("pass", "fail", "error"):
            continue
        m = c.get("measured")
        text = f"measured: {json.dumps(m)[:300]}" + (f"\nexpected: {c['expected']}" if c.get("expected") else "") + \
               (f"\n{c['detail']}" if c.get("detail") else "")
        text = redact_lines(text) if hint == "cause" else text
        tests.append({"name": f"check: {c['id']}", "score": 0.0, "max_score": 0.0,
                      "status": "passed" if c["status"] == "pass" else "failed", "output": cut(text, 4000),
                      "visibility": shown("check", c["id"]), "tags": ["check"]})
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
           "extra_data": {"verdict": result.get("verdict"), "max_score": float(max_score), "fault": fault_of(result),
                          "causes": [d.get("id") for d in result.get("diagnoses", [])],
                          "harness_version": __version__}}
    if execution_time is not None:
        out["execution_time"] = int(round(execution_time))
    return out


def gradescope_one(submission_dir, results_path, *, options: Options | None = None, rubric=None,
                   checker=None) -> dict:
    """Grade the one submission in `submission_dir`; write Gradescope's results.json; return it."""
    opts = options or Options()
    rub = rubric if rubric is not None else rubric_mod.load()
    Path(results_path).unlink(missing_ok=True)       # a crash below must not leave an older grade standing
    folder = Path(submission_dir)
    results_path = Path(results_path)
    try:            # never leave an earlier run's results for Gradescope to read if this one fails
        results_path.unlink()
    except FileNotFoundError:
        pass
    except OSError as e:
        raise GradeError(f"cannot replace {results_path}: {e.strerror or e}") from None
    sub = submission_in(folder)
    t0 = time.monotonic()
    _read(sub, opts)
    shown = str(sub.path or folder)
    if sub.problem:
        result = synthetic_result(shown, "no-submission", sub.problem, student_fault=sub.fault == "student",
                                  opts=opts)
    else:
        try:
            outcome = grade_one(_job(sub, opts), checker)
            result = outcome["result"]
            if not looks_valid(result):
                raise ValueError("malformed result")
        except Exception as e:
            result = synthetic_result(shown, "grader-fault", f"grading failed in the grader: "
                                      f"{type(e).__name__}: {e}", student_fault=False, opts=opts)
    if sub.left_out:
        from ..runner import files_check
        result = dict(result, checks=[files_check(sub.left_out)] + [c for c in result.get("checks") or []
                                                                   if c.get("id") != "submission-files"])
    hint = opts.hint or rub.hint_level or "line"
    if hint == "patch" and sub.path is not None and not sub.problem and not sub.repo:
        _repair(result, sub.path, opts)
    try:
        grade = rubric_mod.score(result, rub)
    except Exception as e:          # Gradescope must read a result, never an earlier run's
        result = synthetic_result(shown, "grader-fault", f"scoring failed in the grader: {type(e).__name__}: {e}",
                                  student_fault=False, opts=opts)
        grade = rubric_mod.score(result, rub)
    out = gradescope_results(result, grade, visibility=vis.fallback(opts.visibility, rub.visibility),
                             stdout_visibility=opts.stdout_visibility, execution_time=time.monotonic() - t0,
                             hint=hint, visibilities=rub.visibility)
    write_json_atomic(out, results_path)
    result["grade"] = grade
    return {"results": out, "result": result}


def _repair(result: dict, path: Path, opts: Options) -> None:
    """Verified repairs for the patch hint level (repair/run.py); a failure leaves the result as it was."""
    try:
        from ..repair.run import repair_check
        from ..runner import Limits
        repair_check(result, path, seed=opts.seed, limits=Limits(**opts.limits()))
    except Exception:      # noqa: BLE001 - a hint is never worth a grade: the result stays as checked
        for d in result.get("diagnoses", []):
            d.pop("repair", None)
