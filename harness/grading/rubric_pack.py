"""A pack's assignment graded per component, in the grader's process (torch-free).

Each component (a binding of the result's edition, harness/packs/components.py) earns its `Binding.points` when
it passes and none otherwise (failing, not implemented, absent, not checked); a pack that gives its bindings no
points shares the rubric's max_score equally. A diagnosis on no component (tampering, a load failure) costs what
the rubric's [causes] table says, as for `lm` (rubric_lm.py). One Gradescope test per component follows.
"""
from __future__ import annotations

from ..packs.api import Pack
from ..packs.components import rows

WHY = {"pass": "passes", "fail": "fails", "not-implemented": "not implemented", "absent": "not defined",
       "not-checked": "could not be checked"}


def score(result: dict, pack: Pack, causes: dict, points, max_score: float) -> dict:
    """{score, max_score, breakdown, components} (the shape rubric_lm.score gives)."""
    comps = rows(result, pack)
    declared = sum(r["points"] for r in comps.values())
    share = (lambda r: r["points"]) if declared > 0 else (lambda r: max_score / max(1, len(comps)))
    total_max = round(declared if declared > 0 else max_score, 2)
    comp_rows, total, breakdown = [], 0.0, []
    for comp, r in comps.items():
        pts = round(share(r), 2)
        earned = pts if r["status"] == "pass" else 0.0
        total += earned
        why = WHY[r["status"]]
        comp_rows.append({"component": comp, "adapter": r["target"], "points": earned, "max_points": pts,
                          "status": r["status"], "cause": r["cause"], "why": why})
        if earned < pts:
            breakdown.append({"kind": "component", "id": comp, "points": round(earned - pts, 2),
                              "title": f"{comp}: {why}" + (f" ({r['cause']})" if r["cause"] else ""),
                              "cause": r["cause"], "charged": True})
    lost, seen = 0.0, set()
    for d in result.get("diagnoses") or []:
        cid = d.get("id") if isinstance(d, dict) else None
        if not cid or cid in seen or d.get("component") in comps or cid not in causes:
            continue
        seen.add(cid)
        pts = points(causes[cid])
        if pts:
            lost += pts
            breakdown.append({"kind": "cause", "id": cid, "points": round(-pts, 2), "title": d.get("title", cid)})
    value = min(total_max, max(0.0, total - lost))
    return {"score": round(value + 0.0, 2), "max_score": total_max, "breakdown": breakdown, "components": comp_rows}


def gradescope_tests(result: dict, grade: dict, pack: Pack, visibility: str = "visible",
                     table: dict | None = None) -> list[dict]:
    """One Gradescope test per component (its credit and diagnosis as markdown), then one per deduction on no
    component; visibility from the rubric's [visibility] table (visibility.py), else `visibility`."""
    from .rubric_lm import markdown
    from .visibility import of
    comps = rows(result, pack)
    tests = []
    for i, row in enumerate(grade.get("components") or [], start=1):
        tests.append({"name": f"{i:02d} {row['component']} ({row['adapter']})", "number": str(i),
                      "score": row["points"], "max_score": row["max_points"],
                      "status": "passed" if row["points"] >= row["max_points"] else "failed",
                      "output": markdown(row, comps.get(row["component"]) or {}), "output_format": "md",
                      "visibility": of(table, "component", row["component"], visibility),
                      "tags": ["pack-component"]})
    for item in grade.get("breakdown") or []:
        if item.get("kind") == "cause":
            tests.append({"name": f"{item['title']} [{item['id']}]"[:200], "score": 0.0,
                          "max_score": abs(float(item["points"])), "status": "failed", "output": item["title"],
                          "visibility": of(table, "cause", item["id"], visibility), "tags": ["cause"]})
    return tests
