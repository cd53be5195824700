"""A pack's assignment: a piece the student must write is still the handout's stub (any pack)."""
from __future__ import annotations

from ..assignments import FOLDER_PACKS
from .base import Cause, Finding, Observed

CAUSE = Cause(
    id="piece-not-implemented",
    title="Pieces of the assignment not implemented yet",
    what="A class or function the assignment asks for is still the handout's stub: its body is only `pass`, "
         "comments, `x = None` and `return x`, or `raise NotImplementedError`.",
    why="Nothing of that piece can be checked (nor graded) until it is written; the pieces built on it fail too.",
    symptom="The piece's checks are skipped as 'not implemented'; the report's checklist marks it so.",
    mechanism="The contract check read the piece's own code and found only stub statements in it (its measured "
              "`not_implemented` names the piece).",
    fix="Write the piece (the handout's TODO); then check again.",
    assignments=FOLDER_PACKS,
    observed=(Observed("contract", "measured.not_implemented"),),
)


def diagnose(ev):
    c = ev.get("contract") or {}
    todo = (c.get("measured") or {}).get("not_implemented") if isinstance(c.get("measured"), dict) else None
    if not isinstance(todo, list) or not todo:
        return None
    comps = ((c.get("data") or {}).get("components") or {}) if isinstance(c.get("data"), dict) else {}
    why = [str((comps.get(t) or {}).get("why") or t) for t in todo[:6]]
    where = (comps.get(todo[0]) or {}).get("location")
    return Finding(0.9, [f"{len(todo)} piece(s) not implemented yet: {', '.join(map(str, todo))}"] + why,
                   where if isinstance(where, dict) and isinstance(where.get("line"), int) else None,
                   component=str(todo[0]))
