"""The HTML report a student reads: one self-contained file (no network, no JavaScript).

    write(result, html_path, source_path=None)   render and write atomically
    render(result, source_path=None) -> str       the HTML text
    render_timings                                 seconds per figure of the last render()

Top: the verdict and the ranked diagnoses (evidence, fix, why, the student's source
around the line). Then the pictures, each only when its artifact is in the result, and
otherwise a sentence that says why it is not (a skipped or failed probe, --quick).
Then the parameter table, every check, the captured output and the code the loader
skipped. Any artifact may be missing, malformed or huge: a section that cannot be
drawn says so and the rest of the report is unaffected.
"""
from __future__ import annotations

import html as _html
import json
import math
import os
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from ..assignments import NAMES as ASSIGNMENTS
from ..checks import not_measured as not_measured_checks
from ..packs.course import line as course_line

from . import figures as F
from .intro import INTRO
from . import lm_sections
from . import sections as S
from .lm_checklist import html_rows
from .terminal import cell_name, limits_text, notebook, source_lines, where
from .text import fmt_num, fmt_value, measured_lines  # noqa: F401 (fmt_value: the template filter; all: the API)
from .text import as_dict
from .text import trunc as _str

TEMPLATES = Path(__file__).parent / "templates"
CONTEXT_LINES = 6
STDOUT_HEAD, STDOUT_TAIL, STDOUT_MAX = 12_000, 18_000, 40_000

#: seconds spent per figure (and in total) by the most recent render(); for benchmarks.
render_timings: dict[str, float] = {}

_env = None


def prepare() -> None:
    """Do write()'s one-time work now (imports, the template, the colour tables): the CLI calls it in a
    thread while the child runs."""
    _environment().get_template("report.html")
    F.warm_up()


def _environment():
    global _env
    if _env is None:
        import jinja2
        _env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                                  autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
                                  trim_blocks=True, lstrip_blocks=True, undefined=jinja2.ChainableUndefined)
        _env.filters["value"] = fmt_value
    return _env


# -- the student's source -------------------------------------------------------------------------

def excerpt(source_path, loc, context: int = CONTEXT_LINES) -> dict | None:
    """The lines around a location: {label, lines: [(number, text, hit)]} or {missing: reason}."""
    if not isinstance(loc, dict) or not (loc.get("line") or loc.get("cell")):
        return None
    if source_path and os.path.isdir(str(source_path)):    # an lm repository: the location names its file
        source_path = None
    got = source_lines(source_path, loc)
    if got is None:
        shown = source_path or loc.get("file") or "the submission"
        return {"missing": f"{where(loc, source_path) or 'This line'} could not be shown: {shown} could not be read, "
                           f"or it changed since the check."}
    lines, n, label = got
    lo, hi = max(1, n - context), min(len(lines), n + context)
    return {"label": label, "lines": [(k, _str(lines[k - 1].rstrip(), 300), k == n) for k in range(lo, hi + 1)]}


# -- sections -------------------------------------------------------------------------------------

LOAD_FAILURES = {"syntax-error", "definition-error", "missing-module", "unreadable-file", "exit-during-load",
                 "missing-name", "timeout", "memory-limit", "crashed", "grader-fault"}

# the picture sections: report/sections.py (a Section each, with its draw function and assignments)
SECTIONS = S.PICTURES
# which section shows the evidence of a check (for 'see also' links from a diagnosis)
CHECK_SECTION = S.CHECK_SECTION
_checks, _by_id = S.checks, S.by_id


NOT_FOR_ASSIGNMENT = "Not measured: no probe produces this for this assignment."


def absent_reason(result: dict, section: S.Section) -> str:
    """One sentence: why this picture is not in the report."""
    producers = section.producers
    err = result.get("error")
    if isinstance(err, dict) and (err.get("kind") or err.get("reason")):
        return f"Not measured: the check stopped early ({_str(err.get('reason') or err.get('kind'), 300)})."
    by_id = _by_id(result)
    if not by_id:
        diags = [d.get("id") for d in result.get("diagnoses") or [] if isinstance(d, dict)]
        if any(d in LOAD_FAILURES for d in diags):
            return "Not measured: your file could not be loaded, so no probe ran. Fix the problem above first."
        return "Not measured: no probe ran on this submission."
    contract = by_id.get("contract")
    if contract and contract.get("status") == "fail":
        return "Not measured: required names are missing (see the diagnosis above), so the probes did not run."
    if section.train_only and result.get("quick"):
        return ("Not measured: this was a --quick check, which skips the training probes. Run "
                "`mtxdiag check FILE` without --quick to see it.")
    for pid in producers:
        c = by_id.get(pid)
        if c is None:
            continue
        st = c.get("status")
        detail = _str(c.get("detail"), 400)
        if st == "skip":
            return f"Not measured: the probe '{pid}' was skipped" + (f" ({detail})." if detail else ".")
        if st == "error":
            return f"Not measured: the probe '{pid}' failed with an error" + (f": {detail}" if detail else ".")
    if any(by_id.get(p) for p in producers):
        return "The probe ran but recorded no data for this picture."
    return NOT_FOR_ASSIGNMENT


def build_sections(result: dict, timings: dict, not_measured: list | None = None) -> list[dict]:
    """The picture sections in order; titles of pictures no probe of this assignment makes go to not_measured."""
    not_measured = [] if not_measured is None else not_measured
    art = as_dict(result.get("artifacts"))
    assignment = result.get("assignment")
    out = []
    for sec in SECTIONS:
        present = any(art.get(k) is not None for k in sec.artifacts)
        if not present and assignment in ASSIGNMENTS and assignment not in sec.assignments:
            continue    # a picture of another assignment: leave it out
        entry: dict[str, Any] = {"id": sec.id, "title": sec.title, "intro": INTRO.get(sec.id, ""), "figures": [],
                                 "absent": None, "error": None, "note": None, "extra": None}
        if present and sec.note is not None:
            entry["note"] = sec.note(result, art)
        if present and sec.extra is not None:
            entry["extra"] = sec.extra(result, art)
        if not present:
            entry["absent"] = absent_reason(result, sec)
            if entry["absent"] == NOT_FOR_ASSIGNMENT:
                not_measured.append(sec.title)   # listed in one line, not as an empty section
                continue
        else:
            t = time.perf_counter()
            try:
                entry["figures"] = sec.draw(art, result)
            except F.FigureError as e:
                entry["error"] = f"This picture could not be drawn: {e}."
            except Exception as e:  # a bug here must not cost the student the rest of the report
                entry["error"] = f"This picture could not be drawn ({type(e).__name__}: {_str(e, 200)})."
            timings[f"figure:{sec.id}"] = round(time.perf_counter() - t, 4)
        out.append(entry)
    return out + lm_sections.sections(result, timings, _str)     # [] unless the assignment is lm


def param_table(result: dict) -> dict:
    c = _by_id(result).get("param-count")
    if c is None:
        return {"absent": absent_reason(result, S.PARAMETERS), "rows": []}
    m = as_dict(c.get("measured"))
    lesson = (c.get("data") or {}).get("lesson") if isinstance(c.get("data"), dict) else None
    lesson = lesson if isinstance(lesson, dict) else {}
    if not m:
        return {"absent": f"The parameter count was not measured ({_str(c.get('detail'), 300) or c.get('status')}).",
                "rows": []}
    rows = []
    for k in ("embeddings", "encoder", "decoder", "generator", "total"):
        yours, theirs = m.get(k), lesson.get(k)
        if yours is None and theirs is None:
            continue
        diff = yours - theirs if isinstance(yours, (int, float)) and isinstance(theirs, (int, float)) else None
        rows.append({"name": k, "yours": fmt_value(yours), "lesson": fmt_value(theirs),
                     "diff": "" if diff is None else ("0" if diff == 0 else f"{diff:+,}"), "same": diff == 0,
                     "total": k == "total"})
    return {"absent": None, "rows": rows, "detail": _str(c.get("detail"), 300), "status": c.get("status")}


STATUS_LABEL = {"pass": "✓ pass", "fail": "✗ fail", "error": "! error", "skip": "– skip", "info": "i info"}


def check_rows(result: dict, source_path=None) -> list[dict]:
    rows = []
    nb = _notebook_path(result, source_path)
    for c in _checks(result)[:500]:
        st, cid = c.get("status"), _str(c.get("id"), 64)
        st = st if isinstance(st, str) and st in STATUS_LABEL else "info"
        rows.append({"id": cid, "status": st, "label": STATUS_LABEL[st],
                     "measured": measured_lines(c.get("measured")), "expected": _str(c.get("expected"), 300),
                     "detail": _str(c.get("detail"), 600), "where": where(c.get("location"), nb),
                     "section": CHECK_SECTION.get(cid)})
    return rows


def _long_text(text) -> dict:
    text = _str(text, 10_000_000)
    if len(text) <= STDOUT_MAX:
        return {"text": text, "omitted": 0, "head": text, "tail": ""}
    return {"text": None, "head": text[:STDOUT_HEAD], "tail": text[-STDOUT_TAIL:],
            "omitted": len(text) - STDOUT_HEAD - STDOUT_TAIL}


def skipped_rows(result: dict, source_path=None) -> list[dict]:
    """The skipped statements; a notebook's are named by cell (cell_name) and their lines in it, which the
    child's entries give in the flattened text."""
    out = []
    lines_of = notebook(_notebook_path(result, source_path))[1]
    for s in (result.get("skipped_code") or [])[:300]:
        if not isinstance(s, dict):
            continue
        line, end = s.get("line"), s.get("end_line")
        if s.get("cell"):
            first = lines_of.get(line) if isinstance(line, int) else None
            last = lines_of.get(end if isinstance(end, int) else line) if isinstance(line, int) else None
            name = cell_name(s, _notebook_path(result, source_path))
            if first and last and first[0] == last[0] == s["cell"] and first[1] and last[1]:
                span = f"{first[1]}" if first[1] == last[1] else f"{first[1]}-{last[1]}"
                where_ = f"{name}, line {span}"
            else:
                where_ = name
        else:
            where_ = f"line {line}" if not end or end == line else f"line {line}-{end}"
        code = _str(s.get("code"), 3000)
        out.append({"where": where_, "reason": _str(s.get("reason"), 300), "code": code})
    return out


def _notebook_path(result: dict, source_path) -> str | None:
    """The notebook whose cells the locations name: the checked file when it is one, else the result's."""
    for p in (source_path, result.get("submission")):
        if isinstance(p, (str, os.PathLike)) and str(p).endswith(".ipynb"):
            return str(p)
    return None


def diagnoses(result: dict, source_path) -> list[dict]:
    from ..repair.show import view as repair_view
    out = []
    for i, d in enumerate([d for d in result.get("diagnoses") or [] if isinstance(d, dict)][:30], start=1):
        loc = d.get("location") if isinstance(d.get("location"), dict) else None
        raw = [_str(e, 5000) for e in (d.get("evidence") or [])[:100]] if isinstance(d.get("evidence"), list) else []
        ev: list[str] = []
        also: list[str] = []
        see: list[str] = []
        for e in raw:
            if e.startswith("also explains ") and len(also) < 60:
                also.append(_str(e[len("also explains "):].split(":", 1)[0].strip(), 64))
            elif len(ev) < 8:
                ev.append(_str(e, 700))
        for cid in [e.split(":", 1)[0].strip() for e in ev] + also:
            sec = CHECK_SECTION.get(cid)
            if sec and sec not in see:
                see.append(sec)
        conf = d.get("confidence")
        out.append({"rank": i, "id": _str(d.get("id"), 80), "title": _str(d.get("title"), 300),
                    "confidence": f"{conf:.0%}" if isinstance(conf, (int, float)) and math.isfinite(conf) else "?",
                    "conf_value": max(0.0, min(1.0, float(conf))) if isinstance(conf, (int, float))
                    and math.isfinite(conf) else 0.0,
                    "evidence": ev, "also": also, "fix": _str(d.get("fix"), 2000), "why": _str(d.get("why"), 3000),
                    "where": where(loc, _notebook_path(result, source_path)), "excerpt": excerpt(source_path, loc), "see": see,
                    "repair": repair_view(d.get("repair")), "course_unseen": course_line(d)})
    return out


SECTION_TITLES = S.TITLES


def context(result: object, source_path=None, timings: dict | None = None) -> dict:
    timings = {} if timings is None else timings
    result = result if isinstance(result, dict) else {}       # whatever it is, a report is written
    checks = _checks(result)
    counts: dict[object, int] = {}    # by status, as the result spells it
    for c in checks:
        counts[c.get("status")] = counts.get(c.get("status"), 0) + 1
    verdict = result.get("verdict")
    verdict = verdict if verdict in ("clean", "problems", "error") else "error"
    diags = diagnoses(result, source_path)
    headline = {"clean": "No problems found",
                "problems": f"{len(diags)} likely problem{'s' if len(diags) != 1 else ''}" if diags else "Problems",
                "error": "The check could not finish"}[verdict]
    t_sec = time.perf_counter()
    not_measured: list[str] = []
    sections = build_sections(result, timings, not_measured)
    timings["figures"] = round(time.perf_counter() - t_sec, 4)
    params = param_table(result)
    if params.get("absent") == NOT_FOR_ASSIGNMENT:
        not_measured.append("Parameter count")
    tms = as_dict(result.get("timings"))
    err = result.get("error") if isinstance(result.get("error"), dict) else None
    return {
        "submission": _str(result.get("submission") or source_path or "submission", 500),
        "name": os.path.basename(_str(result.get("submission") or source_path or "submission", 500)),
        "assignment": _str(result.get("assignment") or "?", 40), "quick": bool(result.get("quick")),
        "version": _str(result.get("harness_version"), 40), "total_s": fmt_num(tms.get("total_s"))
        if isinstance(tms.get("total_s"), (int, float)) else "?",
        "verdict": verdict, "headline": headline, "diagnoses": diags, "error": err,
        "counts": [(s, counts[s], STATUS_LABEL[s]) for s in ("fail", "error", "skip", "info", "pass") if s in counts],
        "n_checks": len(checks), "sections": sections, "params": params, "not_measured": not_measured,
        "unmeasured": not_measured_checks(result),       # required checks skipped: listed in the verdict's box
        "checks": check_rows(result, source_path), "stdout": _long_text(result.get("stdout")),
        "stderr": _long_text(result.get("stderr")), "skipped": skipped_rows(result, source_path),
        "section_titles": SECTION_TITLES, "components": html_rows(result, _str),
        "limits": limits_text(result["limits"]) if isinstance(result.get("limits"), dict) and
        result["limits"].get("enforced_by") else "",
    }


def render(result: dict, source_path=None) -> str:
    """The report as one HTML string. Never raises for a bad result: at worst a plain page with the error."""
    timings: dict[str, float] = {}
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        ctx = context(result, source_path, timings)
        t = time.perf_counter()
        text = _environment().get_template("report.html").render(**ctx)
        timings["template"] = round(time.perf_counter() - t, 4)
    except Exception:
        text = _fallback(result, traceback.format_exc())
    timings["total"] = round(time.perf_counter() - t0, 4)
    timings["cpu"] = round(time.process_time() - c0, 4)   # this process's CPU: robust on a loaded machine
    render_timings.clear()
    render_timings.update(timings)
    return text


def _fallback(result, tb: str) -> str:
    try:
        body = json.dumps({k: result.get(k) for k in ("submission", "verdict", "diagnoses")}, indent=2,
                          default=str)[:200_000]
    except Exception:
        body = repr(result)[:200_000]
    e = _html.escape
    return ("<!doctype html><html lang=en><meta charset=utf-8><title>mtxdiag report</title>"
            "<body style='font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto'>"
            "<h1>mtxdiag report</h1><p>The full report could not be rendered; here is the result's summary.</p>"
            f"<pre style='white-space:pre-wrap'>{e(body)}</pre><details><summary>Why</summary>"
            f"<pre style='white-space:pre-wrap'>{e(tb[-4000:])}</pre></details></body></html>")


def write(result: dict, html_path, source_path=None, text: str | None = None) -> Path:
    """Render (or take `text`, rendered elsewhere) and write atomically (temp file in the same folder, then
    os.replace); parents are created."""
    path = Path(html_path)
    text = render(result, source_path=source_path) if text is None else text
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
