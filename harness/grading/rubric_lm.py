"""Assignment `lm` graded per component, in the grader's process (torch-free: harness/lm_table.py).

A result's components are its `lm-<component>` checks (one per adapter, lm_table.COMPONENTS); the other
`lm-` checks (properties such as lm-rope-identity-at-0, causality, imports) are evidence that names how a
component is wrong, never components themselves. Each component earns the points of the rubric's [lm]
table (harness/grading/rubric_default.toml documents it):

    pass                      all its points
    not implemented, not run  none
    fails                     none, except
      interface-mismatch        interface_credit x points (the maths may be right)
      inherited                 inherited_credit x points: it has no diagnosis of its own and a component
                                it is built from fails (the bug is charged once, where it starts)

The brief training (check lm-training, a full check) charges the component it located a failure in, even
when that component's own check passed. A diagnosis on no component (tampering, a load failure) costs what
the rubric's [causes] table says, as for the other assignments.
"""
from __future__ import annotations

import math

from ..lm_table import ADAPTER, COMPONENTS, DEPS

NAMES = tuple(c for c, _, _ in COMPONENTS)
KEYS = {"max_score", "interface_credit", "inherited_credit", "components"}
TRAINING_CHECK = "lm-training"


class LmTableError(ValueError):
    """The [lm] table cannot be used; the message says why."""


def canonical(name: str) -> str | None:
    """mha_rope or mha-rope -> mha-rope; None for what is not a component."""
    name = str(name).replace("_", "-")
    return name if name in ADAPTER else None


def parse_table(table, source: str) -> dict:
    """The validated [lm] table: {max_score, interface_credit, inherited_credit, components: {comp: points}}."""
    if not isinstance(table, dict):
        raise LmTableError(f"{source}: [lm] must be a table")
    unknown = sorted(set(table) - KEYS)
    if unknown:
        raise LmTableError(f"{source} [lm]: unknown key {unknown[0]!r} (known: {', '.join(sorted(KEYS))})")
    comps = {}
    raw = table.get("components", {})
    if not isinstance(raw, dict):
        raise LmTableError(f"{source} [lm.components] must be a table of component = points")
    for key, value in raw.items():
        comp = canonical(key)
        if comp is None:
            raise LmTableError(f"{source} [lm.components]: unknown component {key!r} (known: {', '.join(NAMES)})")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or not math.isfinite(value):
            raise LmTableError(f"{source} [lm.components] {key} must be a number >= 0, not {value!r}")
        comps[comp] = float(value)
    if not comps:
        raise LmTableError(f"{source} [lm.components]: no component has points")
    total = sum(comps.values())
    max_score = table.get("max_score", total)
    if isinstance(max_score, bool) or not isinstance(max_score, (int, float)) or abs(max_score - total) > 1e-9:
        raise LmTableError(f"{source} [lm]: the components' points sum to {total:g}, max_score is {max_score!r}")
    out = {"max_score": float(total), "components": comps}
    for key, default in (("interface_credit", 0.5), ("inherited_credit", 1.0)):
        v = table.get(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
            raise LmTableError(f"{source} [lm] {key} must be a number in [0, 1], not {v!r}")
        out[key] = float(v)
    return out


def _upstream(comp: str) -> set:
    out, todo = set(), list(DEPS.get(comp, ()))
    while todo:
        c = todo.pop()
        if c not in out:
            out.add(c)
            todo.extend(DEPS.get(c, ()))
    return out


def components(result: dict) -> dict:
    """{component: {status, cause, confidence, evidence, location}} from a validated `lm` result.

    status: pass | fail | not-implemented | not-checked (no check ran: a load failure, a missing adapter)."""
    checks = {c.get("id"): c for c in result.get("checks") or [] if isinstance(c, dict)}
    diags = [d for d in result.get("diagnoses") or [] if isinstance(d, dict)]
    out = {}
    for comp in NAMES:
        c = checks.get(f"lm-{comp}")
        if c is None:
            status = "not-checked"
        elif c.get("status") == "pass":
            status = "pass"
        elif c.get("status") in ("fail", "error"):
            status = "fail"
        elif ((c.get("data") or {}).get("kind")) == "not-implemented":
            status = "not-implemented"
        else:
            status = "not-checked"
        # its own diagnosis: a problem on this component (an info note, e.g. robustness-note, names no bug)
        own = next((d for d in diags if canonical(d.get("component") or "") == comp
                    and d.get("severity", "problem") != "info"), None)
        out[comp] = {"status": status, "cause": own.get("id") if own else None,
                     "confidence": own.get("confidence") if own else None,
                     "evidence": [str(e) for e in (own.get("evidence") or [])[:4]] if own else [],
                     "location": own.get("location") if own else None}
    train = checks.get(TRAINING_CHECK)
    where = canonical(((train or {}).get("data") or {}).get("component") or "")
    if train and train.get("status") == "fail" and where and out[where]["status"] != "fail":
        # its own check passed: the training alone finds it wrong (the engine names it there, training-fails).
        # When its own check fails too, that check's credit stands: its own cause, or inherited from a failing
        # component it is built from, whose diagnosis explains the training (charging it again would take the
        # points of one bug twice: a rope mutant's model leaves the reference's curve because of rope)
        row = out[where]
        row.update(status="fail", evidence=[f"brief training: {train.get('detail', '')}"[:400]])
        if not row["cause"]:
            own = next((d for d in diags if TRAINING_CHECK in (d.get("explains") or [])), None)
            row["cause"] = own.get("id") if own else TRAINING_CHECK
    return out


def _credit(comp: str, row: dict, rows: dict, table: dict) -> tuple[float, str]:
    status = row["status"]
    if status == "pass":
        return 1.0, "passes"
    if status == "not-implemented":
        return 0.0, "not implemented"
    if status == "not-checked":
        return 0.0, "could not be checked"
    failing_below = [c for c in NAMES if c in _upstream(comp) and rows[c]["status"] == "fail"]
    if not row["cause"] and failing_below:
        return table["inherited_credit"], f"fails because {failing_below[0]} (which it is built from) fails; " \
                                          f"charged there"
    if row["cause"] == "interface-mismatch":
        return table["interface_credit"], "interface mismatch (adapter and module disagree)"
    return 0.0, "fails"


def score(result: dict, table: dict, causes: dict, points) -> dict:
    """{score, max_score, rubric, breakdown, components}: per component ([lm] table), less what diagnoses on no
    component cost in the rubric's [causes] (`points(value)` turns "all" into max_score)."""
    rows = components(result)
    comp_rows, total, breakdown = [], 0.0, []
    for comp in NAMES:
        if comp not in table["components"]:
            continue
        pts = table["components"][comp]
        frac, why = _credit(comp, rows[comp], rows, table)
        earned = round(pts * frac, 2)
        total += earned
        r = rows[comp]
        comp_rows.append({"component": comp, "adapter": ADAPTER[comp], "points": earned, "max_points": pts,
                          "status": r["status"], "cause": r["cause"], "why": why})
        if earned < pts:
            breakdown.append({"kind": "component", "id": comp, "points": round(earned - pts, 2),
                              "title": f"{comp}: {why}" + (f" ({r['cause']})" if r["cause"] else ""),
                              "cause": r["cause"], "charged": "charged there" not in why})
    lost, seen = 0.0, set()
    for d in result.get("diagnoses") or []:
        cid = d.get("id") if isinstance(d, dict) else None
        if not cid or cid in seen or canonical(d.get("component") or "") or cid not in causes:
            continue
        seen.add(cid)
        pts = points(causes[cid])
        if pts:
            lost += pts
            breakdown.append({"kind": "cause", "id": cid, "points": round(-pts, 2), "title": d.get("title", cid)})
    value = min(table["max_score"], max(0.0, total - lost))
    return {"score": round(value + 0.0, 2), "max_score": table["max_score"], "breakdown": breakdown,
            "components": comp_rows}


def _markdown(row: dict, comp: dict) -> str:
    """The component's test output (Gradescope's "md"): the grader's own words as markup; what may come from the
    student's code (the file name, the evidence, which quotes errors and values) escaped or fenced (md.py)."""
    from .md import code, fence, inline
    lines = [f"**{row['component']}** (`{row['adapter']}`): {row['status']}"]
    if comp.get("cause"):
        conf = comp.get("confidence")
        lines.append(f"\n**Likely cause:** {code(comp['cause'])}" + (f" (confidence {conf:.2f})" if isinstance(
            conf, (int, float)) else ""))
    loc = comp.get("location") if isinstance(comp.get("location"), dict) else None
    if loc and loc.get("line"):
        lines.append(f"\n**Where:** {code(str(loc.get('file', '')).rsplit('/', 1)[-1])} line "
                     f"{inline(loc['line'])}")
    if comp.get("evidence"):
        lines.append("\n**Evidence:**\n" + fence("\n".join(f"- {e}" for e in comp["evidence"][:4])))
    lines.append(f"\n*Credit:* {row['why']}.")
    return "\n".join(lines)


markdown = _markdown     # a component's test output, for the packs' per-component tests too (rubric_pack.py)


def gradescope_tests(result: dict, grade: dict, visibility: str = "visible", table: dict | None = None) -> list[dict]:
    """One Gradescope test per component (its credit and its diagnosis, markdown), then one per deduction on no
    component (tampering, a load failure); each with the visibility the rubric's [visibility] `table` gives it
    (visibility.py), else `visibility`."""
    from .visibility import of
    comps = components(result)
    tests = []
    for i, row in enumerate(grade.get("components") or [], start=1):
        tests.append({"name": f"{i:02d} {row['component']} ({row['adapter']})", "number": str(i),
                      "score": row["points"], "max_score": row["max_points"],
                      "status": "passed" if row["points"] >= row["max_points"] else "failed",
                      "output": _markdown(row, comps.get(row["component"]) or {}), "output_format": "md",
                      "visibility": of(table, "component", row["component"], visibility),
                      "tags": ["lm-component"]})
    for item in grade.get("breakdown") or []:
        if item.get("kind") == "cause":
            tests.append({"name": f"{item['title']} [{item['id']}]"[:200], "score": 0.0,
                          "max_score": abs(float(item["points"])), "status": "failed", "output": item["title"],
                          "visibility": of(table, "cause", item["id"], visibility), "tags": ["cause"]})
    return tests
