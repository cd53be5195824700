"""Grading rubrics: TOML in, a validated Rubric out, and the score of one validated check result.

The score is computed here, in the grader's process, from the result that the
engine validated; nothing the student's process reports is taken as a score.
See rubric_default.toml for the format.
"""
from __future__ import annotations

import difflib
import hashlib
import math
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..readable import cut
from ..assignments import ALL, assignment_of, folder_pack_of
from .points import scale, valid_total

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

DEFAULT_PATH = Path(__file__).with_name("rubric_default.toml")
# a per-component assignment's credit table ([lm]: harness/grading/rubric_lm.py), named by its Assignment.rubric_table
COMPONENT_TABLES = tuple(a.rubric_table for a in ALL if a.rubric_table)
TOP_KEYS = {"name", "max_score", "error_score", "default_deduction", "causes", "checks", "hint_level", "total",
            "visibility", *COMPONENT_TABLES}


class RubricError(ValueError):
    """The rubric cannot be used; the message says why and where."""


@dataclass(frozen=True)
class Rubric:
    name: str
    max_score: float
    error_score: float
    default_deduction: float | str               # points, or "all" (max_score)
    causes: dict = field(default_factory=dict)   # cause id -> points (float) or "all"
    checks: dict = field(default_factory=dict)   # check id -> points (float) or "all"
    source: str = "<default>"
    digest: str = ""                             # sha256 of the rubric text: scores depend on it, results do not
    lm: dict = field(default_factory=dict)       # assignment lm's [lm] table (rubric_lm.parse_table); {}: the default's
    hint_level: str = ""                         # what students see (repair/show.py): cause | line | patch
    total: float = 0.0                           # > 0: every grade scaled to this many points (points.py); 0: as is
    visibility: dict = field(default_factory=dict)   # Gradescope tests' visibility (visibility.py); {}: the flag's

    def points(self, value) -> float:
        return self.max_score if value == "all" else float(value)


def known_cause_ids() -> dict:
    from ..causes import BY_ID
    return dict(BY_ID)


def known_check_ids() -> set:
    """Every check id a result may hold: the declared checks (harness/checks.py) and the probe ids."""
    from ..checks import known_ids
    return known_ids()


def _number(value, where: str, also: str = "") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RubricError(f"{where} must be a number{also}, not {value!r}")
    if value < 0:
        raise RubricError(f"{where} must be >= 0, not {value!r}")
    return float(value)


def _points(value, where: str) -> float | str:
    """A deduction: a number of points, or "all" (the whole max_score)."""
    return "all" if value == "all" else _number(value, where, ' or "all"')


def _unknown(kind: str, key: str, known, where: str) -> RubricError:
    close = difflib.get_close_matches(key, sorted(known), n=3, cutoff=0.6)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return RubricError(f"{where}: unknown {kind} {key!r}.{hint}")


def parse(text: str, source: str = "<string>") -> Rubric:
    """Validate a rubric's TOML text; raise RubricError with a message an instructor can act on."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise RubricError(f"{source}: not valid TOML: {e}") from None
    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise _unknown("key", unknown[0], TOP_KEYS, source)
    if "max_score" not in data:
        raise RubricError(f"{source}: max_score is required")
    max_score = _number(data["max_score"], f"{source}: max_score")
    if max_score <= 0:
        raise RubricError(f"{source}: max_score must be > 0")
    error_score = _number(data.get("error_score", 0), f"{source}: error_score")
    if error_score > max_score:
        raise RubricError(f"{source}: error_score ({error_score:g}) is above max_score ({max_score:g})")
    default = _points(data.get("default_deduction", 0), f"{source}: default_deduction")
    name = data.get("name", Path(source).stem if source != "<string>" else "rubric")
    if not isinstance(name, str):
        raise RubricError(f"{source}: name must be a string")
    tables = {}
    for table, known, kind in (("causes", known_cause_ids(), "cause id"), ("checks", known_check_ids(), "check id")):
        raw = data.get(table, {})
        if not isinstance(raw, dict):
            raise RubricError(f"{source}: [{table}] must be a table of id = points")
        out = {}
        for key, value in raw.items():
            if key not in known:
                raise _unknown(kind, key, known, f"{source} [{table}]")
            out[key] = _points(value, f"{source} [{table}] {key}")
        tables[table] = out
    lm = {}
    for table in (t for t in COMPONENT_TABLES if t in data):      # one today: [lm]
        from .rubric_lm import LmTableError, parse_table
        try:
            lm = parse_table(data[table], source)
        except LmTableError as e:
            raise RubricError(str(e)) from None
    hint = data.get("hint_level", "")
    if hint and hint not in ("cause", "line", "patch"):
        raise RubricError(f"{source}: hint_level must be \"cause\", \"line\" or \"patch\", not {hint!r}")
    from . import visibility as vis
    from .points import valid_total
    try:
        total = valid_total(data["total"], f"{source}: total") if "total" in data else 0.0
        shown = vis.parse(data["visibility"], source, known_cause_ids()) if "visibility" in data else {}
    except ValueError as e:
        raise RubricError(str(e)) from None
    return Rubric(name=name, max_score=max_score, error_score=error_score, hint_level=hint, total=total,
                  visibility=shown, default_deduction=default,
                  causes=tables["causes"], checks=tables["checks"], source=source,
                  digest=hashlib.sha256(text.encode("utf-8")).hexdigest(), lm=lm)


def load(path: str | Path | None = None) -> Rubric:
    """The rubric at `path`, or the default one; RubricError if unreadable or invalid."""
    p = Path(path) if path is not None else DEFAULT_PATH
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise RubricError(f"cannot read the rubric {p}: {e}") from None
    return parse(text, str(p) if path is not None else "<default rubric>")


def with_points(rubric: Rubric, points: float | None) -> Rubric:
    """The rubric with its grades scaled to `points` (`--points N`, over the rubric's `total`); None: as it is.
    The digest changes with it: a batch's cached grades are recomputed."""
    if not points:
        return rubric
    try:
        total = valid_total(points, "--points")
    except ValueError as e:
        raise RubricError(str(e)) from None
    digest = hashlib.sha256(f"{rubric.digest}\npoints={total!r}".encode()).hexdigest()
    return replace(rubric, total=total, digest=digest)


def _round(x: float) -> float:
    return round(x + 0.0, 2)


def score(result: dict, rubric: Rubric) -> dict:
    """{score, max_score, breakdown} for one validated result, out of the rubric's total when it has one.

    score is None when the grader itself failed (the row must be regraded, not given a mark).
    """
    grade = _score(result, rubric)
    return scale(grade, rubric.total) if rubric.total else grade


def _score(result: dict, rubric: Rubric) -> dict:
    breakdown = []
    err = result.get("error")
    if err and err.get("student_fault") is False:
        return {"score": None, "max_score": rubric.max_score, "rubric": rubric.name,
                "breakdown": [{"kind": "grader-fault", "id": "grader-fault", "points": 0.0,
                               "title": "The grader failed; this submission will be regraded: "
                                        + cut(err.get("reason", ""), 300)}]}
    if result.get("verdict") == "error":
        reason = cut((err or {}).get("reason", "the check did not finish"), 300)
        return {"score": _round(rubric.error_score), "max_score": rubric.max_score, "rubric": rubric.name,
                "breakdown": [{"kind": "error", "id": str((err or {}).get("kind", "error")),
                               "points": _round(rubric.error_score - rubric.max_score),
                               "title": f"the check could not finish: {reason}"}]}
    pack = folder_pack_of(result.get("assignment"))
    if pack is not None and assignment_of(result.get("assignment")).per_component:
        from . import rubric_pack            # per component, by the pack's bindings (Binding.points)
        s = rubric_pack.score(result, pack, rubric.causes, rubric.points, rubric.max_score)
        return {"score": _round(s["score"]), "max_score": s["max_score"], "rubric": rubric.name,
                "breakdown": s["breakdown"], "components": s["components"]}
    if assignment_of(result.get("assignment")).per_component:
        return lm_score(result, rubric)
    total = 0.0
    seen = set()
    for d in result.get("diagnoses", []):
        cid = d.get("id")
        if cid in seen:
            continue
        seen.add(cid)
        pts = rubric.points(rubric.causes.get(cid, rubric.default_deduction))
        total += pts
        breakdown.append({"kind": "cause", "id": cid, "points": _round(-pts), "title": d.get("title", cid)})
    for c in result.get("checks", []):
        if c.get("id") in rubric.checks and c.get("status") in ("fail", "error"):
            pts = rubric.points(rubric.checks[c["id"]])
            total += pts
            breakdown.append({"kind": "check", "id": c["id"], "points": _round(-pts),
                              "title": f"check {c['id']} {'failed' if c['status'] == 'fail' else 'raised an error'}"})
    value = min(rubric.max_score, max(0.0, rubric.max_score - total))
    return {"score": _round(value), "max_score": rubric.max_score, "rubric": rubric.name, "breakdown": breakdown}


def lm_table(rubric: Rubric) -> dict:
    """The rubric's [lm] table, or the default rubric's when it has none."""
    if rubric.lm:
        return rubric.lm
    return load().lm


def lm_score(result: dict, rubric: Rubric) -> dict:
    """Assignment `lm`: partial credit per component (harness/grading/rubric_lm.py); one bug does not zero the grade."""
    from . import rubric_lm
    s = rubric_lm.score(result, lm_table(rubric), rubric.causes, rubric.points)
    return {"score": _round(s["score"]), "max_score": s["max_score"], "rubric": rubric.name,
            "breakdown": s["breakdown"], "components": s["components"]}
