"""Would the course's own checks have seen it? The parent's reading of the replay probe (child side:
harness/child/probes/roles/course.py) for a pack's diagnoses. Torch-free.

A binding that declares how the course's checks call it (api.CourseCall) has a check `<component>.course` whose
`data.course_calls` the child measured: {"visible": bool, "calls": [{"name", "passed", "rel_error" | "problem"}]}.
It is read here as untrusted data (types and sizes checked; anything else is no measurement); a binding declared
with NO_COURSE_CHECK has the same check with no calls and `"unchecked": true`: the course runs no check of it. A diagnosis on a
component whose every course call passes (and no other piece's course call fails unexplained) is a real bug the
course's own checks would not have seen: the result's
Diagnosis carries `course_invisible` True (False when they would see it; absent when not measured) and one line
of evidence saying so, which the terminal, the HTML report and the JSON show.
"""
from __future__ import annotations

UNSEEN = "the course's own checks would not have seen this"
NO_CHECK = "the course runs no check of this piece"     # why, for a piece declared NO_COURSE_CHECK
MAX_CALLS = 16


def _call(c: object) -> dict | None:
    if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not isinstance(c.get("passed"), bool):
        return None
    err = c.get("rel_error")
    if err is not None and (not isinstance(err, (int, float)) or isinstance(err, bool) or not err >= 0):
        return None
    problem = c.get("problem")
    return {"name": c["name"][:200], "passed": c["passed"], "rel_error": None if err is None else float(err),
            **({"problem": problem[:200]} if isinstance(problem, str) else {})}


def replay_of(checks: list, component: str) -> dict | None:
    """The validated course replay of `component` ({"visible", "calls"}), or None when none was measured."""
    c = next((c for c in checks if isinstance(c, dict) and c.get("id") == f"{component}.course"), None)
    if c is None or c.get("status") != "info":
        return None
    r = (c.get("data") or {}).get("course_calls")
    if not isinstance(r, dict) or not isinstance(r.get("visible"), bool) or not isinstance(r.get("calls"), list):
        return None
    if r.get("unchecked") is True:     # the pack declares the course runs no check of it (NO_COURSE_CHECK)
        return {"visible": False, "calls": [], "unchecked": True} if not r["calls"] and not r["visible"] else None
    calls = [_call(x) for x in r["calls"][:MAX_CALLS]]
    if not calls or any(x is None for x in calls) or r["visible"] != (not all(x["passed"] for x in calls)):
        return None
    return {"visible": r["visible"], "calls": calls}


def sentence(r: dict) -> str:
    """One line of evidence: what the course's checks would say of the component."""
    if r.get("unchecked"):
        return f"{UNSEEN}: {NO_CHECK}"
    if not r["visible"]:
        worst = max((x["rel_error"] or 0.0 for x in r["calls"]), default=0.0)
        return (f"{UNSEEN}: called as they call it ({'; '.join(x['name'] for x in r['calls'])}) it agrees with the "
                f"reference within their relative-error bar (worst {worst:.2g})")
    failed = [x for x in r["calls"] if not x["passed"]]
    return "the course's own checks would see it, without naming a cause: " + "; ".join(
        f"{x['name']}: " + (x.get("problem") or f"relative error {x['rel_error']:.2g}") for x in failed[:3])


def annotate(diagnoses: list[dict], checks: list) -> None:
    """Mark each diagnosis on a component with a measured course replay (in place).

    The course's checks see a bug when its piece's own calls fail, or when another piece's calls fail and no
    diagnosis (at 0.5 or more) of that piece explains why (a course check of a larger piece that uses this one: the
    captioning model over an attention layer). Only when neither holds would they not have seen it."""
    replays = {c["id"][:-len(".course")]: r for c in checks if isinstance(c, dict) and isinstance(c.get("id"), str)
               and c["id"].endswith(".course") for r in [replay_of(checks, c["id"][:-len(".course")])] if r}
    own = {d.get("component") for d in diagnoses if (d.get("confidence") or 0) >= 0.5}
    for d in diagnoses:
        comp = d.get("component")
        r = replays.get(comp) if isinstance(comp, str) else None
        if r is None:
            continue
        elsewhere = [(c, x) for c, x in replays.items() if c != comp and x["visible"] and c not in own]
        d["course_invisible"] = not r["visible"] and not elsewhere
        line = sentence(r) if r["visible"] or not elsewhere else (
            f"the course's own checks would see it through {elsewhere[0][0]}, without naming a cause: "
            + sentence(elsewhere[0][1]).split(": ", 1)[1])
        d["evidence"] = list(d.get("evidence") or []) + [line]


def line(d: dict) -> str:
    """The reports' course line of a diagnosis the course's checks would not have seen ("" for any other), with why
    when the course runs no check of its piece (the terminal and the HTML report both show it)."""
    if d.get("course_invisible") is not True:
        return ""
    why = f": {NO_CHECK}" if any(isinstance(e, str) and e.endswith(NO_CHECK) for e in d.get("evidence") or ()) else ""
    return f"{UNSEEN}{why}"
