"""A grade scaled to another total: the rubric's `total = N` or `--points N` (torch-free).

Every number of the grade is multiplied by N / max_score and kept in hundredths of a point, so the results'
tests say what the grade says: each deduction, each lm component's points and maximum, and the score. Rounding
never moves the total: the components' maxima are rounded, then the largest absorbs what rounding gained or
lost (its first, in build order, on a tie), so they sum to exactly N; a component at full marks keeps its
whole (rounded) maximum, so a submission at full marks scores exactly N. The score is recomputed from the
scaled parts (lm: the components' points less the deductions on no component; the others: N less the
deductions), clamped to [0, N]; a grader fault's score stays None.
"""
from __future__ import annotations

import math


def _cents(x: float, f: float) -> int:
    return int(round(float(x) * f * 100))


def valid_total(value, where: str) -> float:
    """A total to scale to: a finite number > 0, at most a million points; ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or \
            not 0 < value <= 1_000_000:
        raise ValueError(f"{where} must be a number of points > 0, not {value!r}")
    return float(value)


def scale(grade: dict, total: float) -> dict:
    """A copy of the grade (rubric.score's dict) out of `total` points."""
    top = float(grade.get("max_score") or 0.0)
    if top <= 0 or not total:
        return grade
    f, n_c = total / top, int(round(total * 100))
    out = dict(grade, max_score=n_c / 100)
    comps = grade.get("components") or []
    by_comp: dict = {}
    if comps:
        maxima = [_cents(c["max_points"], f) for c in comps]
        biggest = max(range(len(comps)), key=lambda i: (comps[i]["max_points"], -i))
        maxima[biggest] += n_c - sum(maxima)
        earned = [m if c["points"] >= c["max_points"] else min(_cents(c["points"], f), m)
                  for c, m in zip(comps, maxima)]
        out["components"] = [dict(c, points=e / 100, max_points=m / 100) for c, e, m in zip(comps, earned, maxima)]
        by_comp = {c["component"]: (e, m) for c, e, m in zip(comps, earned, maxima)}
    breakdown, lost = [], 0
    for item in grade.get("breakdown") or []:
        if item.get("kind") == "component" and comps and item.get("id") in by_comp:
            e, m = by_comp[item["id"]]
            breakdown.append(dict(item, points=(e - m) / 100))
            continue
        c = _cents(item.get("points", 0.0), f)
        lost += c
        breakdown.append(dict(item, points=c / 100))
    out["breakdown"] = breakdown
    if grade.get("score") is None:
        return out
    if comps:
        score_c = sum(e for e, _ in by_comp.values()) + lost
    elif float(grade["score"]) >= top:
        score_c = n_c
    else:
        score_c = n_c + lost
    out["score"] = min(n_c, max(0, score_c)) / 100
    return out
