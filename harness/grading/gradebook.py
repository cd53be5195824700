"""The class gradebook: grades.csv and index.html, rebuilt from the per-student result files.

Nothing here runs a check: it reads OUT/students/<id>/result.json (written by
harness.grading.grade) for every student of the roster, so that the gradebook is the
same whether the results were made in one run, in several, or read from a cache.
"""
from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import os
import statistics
import tempfile
from collections import Counter
from pathlib import Path
from urllib.parse import quote

from ..readable import cut
from .. import __version__

CSV_FIELDS = ("student", "score", "max_score", "verdict", "fault", "integrity", "causes", "seconds", "reason")
TOP_CAUSES = 5
# causes that say the code could not be checked (not a modelling bug to re-teach)
DID_NOT_RUN = {"no-check", "syntax-error", "definition-error", "missing-module", "missing-name", "unreadable-file",
               "exit-during-load", "tampering", "timeout", "memory-limit", "crashed", "grader-fault"}
TEMPLATES = Path(__file__).parents[1] / "report" / "templates"


def write_text_atomic(text: str, path: str | os.PathLike) -> None:
    """Write to a temporary file beside `path`, then rename it over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)          # mkstemp makes 0600: every output file gets the reports' mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_result(path: Path) -> dict | None:
    """A result file, or None if it is missing or not a result (half-written files never exist: see grade)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("grade"), dict) else None


def reason_of(result: dict) -> str:
    """One line on why a submission could not be (fully) checked; empty for a normal result."""
    err = result.get("error")
    if err:
        return cut(err.get("reason", ""), 300)
    diags = result.get("diagnoses") or []
    load_ids = {"syntax-error", "definition-error", "missing-module", "missing-name", "unreadable-file",
                "exit-during-load", "tampering"}
    if diags and diags[0].get("id") in load_ids:
        ev = diags[0].get("evidence") or []
        text = diags[0].get("title", "") + (": " + "; ".join(str(e) for e in ev[:2]) if ev else "")
        return cut(text, 300)
    return ""


INTEGRITY_CHECKS = ("result-channel", "tamper", "tamper-static", "isolation")


def integrity_of(result: dict) -> str:
    """What the code tried beyond its model, separate from its bugs: '' when nothing, else e.g.
    'tampering; forbidden: connect, read; output flood'. Read from the checks, so it shows even on a row whose
    first diagnosis is a load failure."""
    failed = {c.get("id"): c for c in result.get("checks") or []
              if isinstance(c, dict) and c.get("status") == "fail"}
    parts = []
    if any(cid in failed for cid in INTEGRITY_CHECKS) or \
            any(isinstance(d, dict) and d.get("id") == "tampering" for d in result.get("diagnoses") or []):
        parts.append("tampering")
    if "forbidden-ops" in failed:
        from ..causes.forbidden_operation import kinds_text      # every kind, with its count
        parts.append("forbidden: " + (kinds_text(failed["forbidden-ops"]) or "operations"))
    if "output-flood" in failed:
        parts.append("output flood")
    return "; ".join(parts)


def row_from_result(student: str, result: dict | None, students_dir: Path) -> dict:
    if result is None:
        return {"student": student, "score": None, "max_score": None, "verdict": "pending", "fault": "none",
                "integrity": "",
                "causes": [], "cause_titles": [], "seconds": None, "reason": "not graded yet", "href": None,
                "report_error": None, "score_text": "", "fault_text": "– (not graded yet)", "shown": "pending",
                "shown_text": "pending"}
    grade = result.get("grade") or {}
    grading = result.get("grading") or {}
    diags = [d for d in result.get("diagnoses") or [] if isinstance(d, dict)]
    notes = {str(d.get("id")) for d in diags if d.get("severity") == "info"}     # reported, never a bug
    causes = [str(d.get("id")) for d in diags][:TOP_CAUSES]
    score, max_score = grade.get("score"), grade.get("max_score")
    base = students_dir / student
    report = (grading.get("report") or {})
    if (base / "report.html").exists():
        href = f"students/{quote(student)}/report.html"
    elif (base / "result.json").exists():
        href = f"students/{quote(student)}/result.json"
    else:
        href = None
    seconds = (result.get("timings") or {}).get("total_s")
    return _shown({"student": student, "score": score, "max_score": max_score,
            "verdict": result.get("verdict", "error"), "fault": grading.get("fault", "none"),
            "integrity": integrity_of(result), "causes": causes, "cause_titles": [str(d.get("title", "")) for d in diags][:TOP_CAUSES],
            "all_causes": [(str(d.get("id")), str(d.get("title", ""))) for d in diags if str(d.get("id")) not in notes],
            "seconds": round(float(seconds), 1) if isinstance(seconds, (int, float)) else None,
            "reason": reason_of(result), "href": href, "report_error": report.get("error"),
            "score_text": "" if score is None else f"{_num(score)} / {_num(max_score)}",
            "components_lost": components_lost(grade, notes),
            "fault_text": FAULT_TEXT.get(grading.get("fault", "none"), str(grading.get("fault")))})


def _shown(row: dict) -> dict:
    """The row with what the table's verdict column says (`shown`, `shown_text`): a row the check could not run
    to the end (stopped_row: an error, or a syntax error whose result says `problems`) reads "could not be
    checked", as the cards and the "could not be checked" section count it; the CSV keeps the result's verdict."""
    row["shown"] = "not-checked" if stopped_row(row) else row["verdict"]
    row["shown_text"] = "could not be checked" if row["shown"] == "not-checked" else row["verdict"]
    return row


# a component charged points without a cause of its own, by its status (rubric_lm.components)
UNDIAGNOSED = {"not-implemented": "not implemented", "not-checked": "could not be checked"}


def components_lost(grade: dict, notes: set[str] | frozenset[str] = frozenset()) -> list[tuple[str, str]]:
    """Assignment lm: (component, why) of each component charged points (not those that only inherit another's
    failure): what the per-component "what to re-teach" counts. `why`: what its status says when it did not run
    (UNDIAGNOSED: "not implemented"), else its cause (never an info note: `notes`), else ''."""
    status = {str(c.get("component")): c.get("status") for c in grade.get("components") or [] if isinstance(c, dict)}
    out = []
    for b in grade.get("breakdown") or []:
        if isinstance(b, dict) and b.get("kind") == "component" and b.get("charged", True):
            comp, cause = str(b.get("id")), str(b.get("cause") or "")
            out.append((comp, UNDIAGNOSED.get(str(status.get(comp))) or ("" if cause in notes else cause)))
    return out


def _num(x) -> str:
    if x is None:
        return ""
    return f"{x:g}" if isinstance(x, float) else str(x)


def collect(out: str | os.PathLike, roster: list[tuple[str, str | None]]) -> list[dict]:
    """One row per roster entry (student id, expected cache key or None for any), sorted by student.

    A result whose key is not the expected one (the file changed and was not regraded yet) is 'pending'.
    """
    students_dir = Path(out) / "students"
    rows = []
    for student, key in sorted(roster, key=lambda sk: sk[0]):
        result = read_result(students_dir / student / "result.json")
        if result is not None and key is not None and (result.get("grading") or {}).get("key") != key:
            result = None
        rows.append(row_from_result(student, result, students_dir))
    return rows


def _csv_safe(v: str) -> str:
    """Keep a spreadsheet from reading a student-chosen name as a formula."""
    return "'" + v if v[:1] in ("=", "+", "-", "@", "\t", "\r") else v


def csv_text(rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for r in rows:
        w.writerow([_csv_safe(r["student"]), _num(r["score"]), _num(r["max_score"]), r["verdict"], r["fault"],
                    r.get("integrity", ""), ";".join(r["causes"]), "" if r["seconds"] is None else f"{r['seconds']:.1f}",
                    _csv_safe(r["reason"])])
    return buf.getvalue()


def cause_summary(rows: list[dict]) -> list[dict]:
    """How many students have each cause, most common first (ties by id): what to re-teach. Info notes (a
    deviation the course cannot see, a robustness note) are not bugs: rows leave them out of `all_causes`."""
    counts: Counter[str] = Counter()
    titles: dict[str, str] = {}
    for r in rows:
        if r["verdict"] == "error" and not r.get("all_causes"):     # stopped before any check: still counted
            counts["no-check"] += 1
            titles.setdefault("no-check", "Nothing could be checked (no file, several files, or unreadable): "
                                          "see the row's reason")
        seen = set()
        for cid, title in r.get("all_causes", []):
            if cid not in seen:
                seen.add(cid)
                counts[cid] += 1
                titles.setdefault(cid, title)
    n = max(1, sum(1 for r in rows if r["verdict"] != "pending"))
    return [{"id": cid, "title": titles[cid], "count": k, "share": k / n, "ran": cid not in DID_NOT_RUN}
            for cid, k in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def component_summary(rows: list[dict]) -> list[dict]:
    """Assignment lm: how many students lose points on each component, most common first, with the causes
    diagnosed there (most common first; "not implemented" for a component that raises NotImplementedError)."""
    counts: Counter[str] = Counter()
    causes: dict[str, Counter[str]] = {}
    for r in rows:
        for comp, cause in dict(r.get("components_lost") or []).items():
            counts[comp] += 1
            causes.setdefault(comp, Counter())[cause or "(no diagnosis)"] += 1
    n = max(1, sum(1 for r in rows if r["verdict"] != "pending"))
    return [{"id": comp, "count": k, "share": k / n,
             "title": ", ".join(f"{c} ({m})" for c, m in causes[comp].most_common(4))}
            for comp, k in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
def stopped_row(r: dict) -> bool:
    """The check did not run to the end: an error, or a first cause that says the code could not run (a syntax
    error scores as `problems` but nothing of it was checked)."""
    return r["verdict"] == "error" or bool(r["causes"] and r["causes"][0] in DID_NOT_RUN)


FAULT_TEXT = {"none": "– (ran to the end)", "student": "student's code stopped it",
              "grader": "grader (rerun)"}


def stats(rows: list[dict]) -> dict:
    scores = [r["score"] for r in rows if isinstance(r["score"], (int, float))]
    maxes = {r["max_score"] for r in rows if r["max_score"] is not None}
    stopped = sum(1 for r in rows if stopped_row(r))
    return {"students": len(rows), "verdicts": Counter(r["verdict"] for r in rows),
            "stopped": stopped,                        # the same rows as the "could not be checked" section
            "with_problems": sum(1 for r in rows if r["verdict"] == "problems" and not stopped_row(r)),
            "faults": Counter(r["fault"] for r in rows),
            "integrity": sum(1 for r in rows if r.get("integrity")),
            "mean": round(statistics.fmean(scores), 1) if scores else None,
            "median": round(statistics.median(scores), 1) if scores else None,
            "max_score": _num(maxes.pop()) if len(maxes) == 1 else None}


def html_text(rows: list[dict], *, title: str = "mtxdiag gradebook", rubric_name: str = "", options: str = "") -> str:
    import jinja2
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    return env.get_template("gradebook.html").render(
        title=title, rows=rows, causes=cause_summary(rows), components=component_summary(rows), stats=stats(rows), rubric_name=rubric_name,
        options=options, version=__version__,
        built=_dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"))


def rebuild(out: str | os.PathLike, roster: list[tuple[str, str | None]], *, title: str = "mtxdiag gradebook",
            rubric_name: str = "", options: str = "") -> list[dict]:
    """Write OUT/grades.csv and OUT/index.html from the result files; return the rows."""
    out = Path(out)
    rows = collect(out, roster)
    write_text_atomic(csv_text(rows), out / "grades.csv")
    write_text_atomic(html_text(rows, title=title, rubric_name=rubric_name, options=options), out / "index.html")
    return rows
