"""Per-component partial credit for assignment `lm`, and one Gradescope test per component.

The [lm] table of a rubric (harness/rubric_default.toml documents it) gives each component its
points. A score is computed in the grader's process from per-component diagnoses (the dicts of
harness.lmdiag.diagnose, or anything with the same status/cause/evidence fields), never from what
the student's process reports.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

from ..assignments import LM
from .inputs import ADAPTER, COMPONENTS, canonical, closure

DEFAULT_PATH = Path(__file__).resolve().parents[1] / "rubric_default.toml"
KEYS = {"max_score", "interface_credit", "inherited_credit", "components"}


class LmRubricError(ValueError):
    """The [lm] table cannot be used; the message says why."""


@dataclass(frozen=True)
class LmRubric:
    max_score: float
    components: dict = field(default_factory=dict)     # component -> points
    interface_credit: float = 0.5
    inherited_credit: float = 1.0


def _fraction(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise LmRubricError(f"{where} must be a number in [0, 1], not {value!r}")
    return float(value)


def parse(text: str, source: str = "<string>") -> LmRubric:
    try:
        table = tomllib.loads(text).get(LM.rubric_table)
    except tomllib.TOMLDecodeError as e:
        raise LmRubricError(f"{source}: not valid TOML: {e}") from None
    if not isinstance(table, dict):
        raise LmRubricError(f"{source}: no [lm] table")
    unknown = sorted(set(table) - KEYS)
    if unknown:
        raise LmRubricError(f"{source} [lm]: unknown key {unknown[0]!r} (known: {', '.join(sorted(KEYS))})")
    comps = {}
    for key, value in table.get("components", {}).items():
        try:
            comp = canonical(key)
        except KeyError:
            raise LmRubricError(f"{source} [lm.components]: unknown component {key!r} "
                                f"(known: {', '.join(COMPONENTS)})") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or not math.isfinite(value):
            raise LmRubricError(f"{source} [lm.components] {key} must be a number >= 0, not {value!r}")
        comps[comp] = float(value)
    if not comps:
        raise LmRubricError(f"{source} [lm.components]: no component has points")
    total = sum(comps.values())
    max_score = float(table.get("max_score", total))
    if abs(max_score - total) > 1e-9:
        raise LmRubricError(f"{source} [lm]: the components' points sum to {total:g}, max_score is {max_score:g}")
    return LmRubric(max_score, comps, _fraction(table.get("interface_credit", 0.5), f"{source} [lm] interface_credit"),
                    _fraction(table.get("inherited_credit", 1.0), f"{source} [lm] inherited_credit"))


def load(path=None) -> LmRubric:
    p = Path(path) if path is not None else DEFAULT_PATH
    return parse(p.read_text(encoding="utf-8"), str(p))


def _credit(comp, result, results, rubric) -> tuple[float, str]:
    """(fraction of the component's points earned, why)."""
    status = (result or {}).get("status", "not-implemented")
    if status == "pass":
        return 1.0, "passes"
    if status == "not-implemented":
        return 0.0, "not implemented"
    upstream = [c for c in closure(comp) if c != comp and (results.get(c) or {}).get("status") == "fail"]
    where = result.get("mutant_component") or result.get("inherited_from")
    if upstream or (where and where != comp):
        src = where if where and where != comp else upstream[0]
        return rubric.inherited_credit, f"fails because {src} (which it is built from) fails; charged there"
    if result.get("cause") == "interface-mismatch":
        return rubric.interface_credit, "interface mismatch (adapter and module disagree)"
    return 0.0, "fails"


def score(results: dict, rubric: LmRubric | None = None) -> dict:
    """{score, max_score, components: [{component, points, max_points, status, cause, why}]}."""
    rubric = rubric or load()
    results = {canonical(k): v for k, v in results.items()}
    rows, total = [], 0.0
    for comp in COMPONENTS:
        if comp not in rubric.components:
            continue
        pts = rubric.components[comp]
        r = results.get(comp) or {"status": "not-implemented"}
        frac, why = _credit(comp, r, results, rubric)
        earned = round(pts * frac, 2)
        total += earned
        rows.append({"component": comp, "points": earned, "max_points": pts, "status": r.get("status"),
                     "cause": r.get("cause"), "why": why})
    return {"score": round(total, 2), "max_score": rubric.max_score, "components": rows}


def markdown(result: dict) -> str:
    """A component's diagnosis as Gradescope markdown."""
    status = result.get("status", "not-implemented")
    lines = [f"**{result.get('component')}** (`{result.get('adapter') or ADAPTER.get(result.get('component'), '')}`): "
             f"{status}"]
    if result.get("cause"):
        lines.append(f"\n**Likely cause:** `{result['cause']}` (confidence {result.get('confidence', 0):.2f})")
    if result.get("evidence"):
        lines.append("\n**Evidence:**\n" + "\n".join(f"- {e}" for e in result["evidence"][:8]))
    return "\n".join(lines)


def gradescope_tests(results: dict, rubric: LmRubric | None = None, visibility: str = "visible") -> list[dict]:
    """One Gradescope test per component: its credit and its diagnosis (output_format md)."""
    rubric = rubric or load()
    scored = score(results, rubric)
    results = {canonical(k): v for k, v in results.items()}
    tests = []
    for i, row in enumerate(scored["components"], start=1):
        r = results.get(row["component"]) or {"component": row["component"], "status": "not-implemented"}
        out = markdown({"component": row["component"], **r}) + f"\n\n*Credit:* {row['why']}."
        tests.append({"name": f"{i:02d} {row['component']} ({ADAPTER[row['component']]})", "number": str(i),
                      "score": row["points"], "max_score": row["max_points"],
                      "status": "passed" if row["points"] >= row["max_points"] else "failed",
                      "output": out, "output_format": "md", "visibility": visibility, "tags": ["lm-component"]})
    return tests
