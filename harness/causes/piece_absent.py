"""A pack's assignment: a piece the student must write is not in the submission at all (any pack)."""
from __future__ import annotations

from ..assignments import FOLDER_PACKS
from .base import Cause, Finding, Observed

CAUSE = Cause(
    id="piece-absent",
    title="Pieces of the assignment are missing",
    what="A class or function the assignment's edition asks for is not defined where the assignment puts it: its "
         "file (module) is not in the submission or cannot be imported, or it does not define the name.",
    why="The checks of that piece cannot run, and the course's own code that imports it would fail.",
    symptom="The piece's checks are skipped as absent; the report's checklist marks it 'not defined'.",
    mechanism="Importing the piece's module from the submission folder failed, or the module lacks the name (the "
              "contract check's measured `absent` names the piece, its data says why).",
    fix="Keep the handout's file layout and names (the module path and the class or function name shown); an "
        "import error in the module is shown with its line.",
    assignments=FOLDER_PACKS,
    observed=(Observed("contract", "measured.absent"),),
)


def diagnose(ev):
    c = ev.get("contract") or {}
    gone = (c.get("measured") or {}).get("absent") if isinstance(c.get("measured"), dict) else None
    if not isinstance(gone, list) or not gone:
        return None
    comps = ((c.get("data") or {}).get("components") or {}) if isinstance(c.get("data"), dict) else {}
    why = [f"{t}: {(comps.get(t) or {}).get('why') or 'absent'}" for t in gone[:6]]
    return Finding(0.9, [f"{len(gone)} piece(s) missing: {', '.join(map(str, gone))}"] + why, component=str(gone[0]))
