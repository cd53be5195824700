"""A check the verdict rests on could not be measured: the result is incomplete, never `clean`.

Each assignment declares the probes a full check must measure (Assignment.must_measure). When one of their checks
is skipped because the harness could not measure it (checks.not_measured: not because the part is absent or not
implemented, which the contract and the component checklist report, and not by the probe's design), the summary
lists it with why and this finding keeps the verdict at `problems`: a CLEAN that silently rests on fewer checks
than it says would be a wrong answer. Below 0.5, on no component, costing nothing in the default rubric: it does
not accuse the student's code, it says what is not known.
"""
from __future__ import annotations

from ..assignments import NAMES
from ..checks import not_measured
from .base import Cause, Finding

CAUSE = Cause(
    id="check-not-measured",
    title="The check is incomplete: a required check could not be measured",
    what="A check that the verdict rests on (the assignment's required checks: for lm every component's check and "
         "the brief training; for reversal its training checks; for block its tiny language model) was skipped "
         "because the harness could not measure it, e.g. the brief training could not find or call the model the "
         "adapter builds, or the check's own code failed.",
    why="Without it the result says less than it seems to: a clean verdict would rest on fewer checks than it "
        "claims, and a bug only that check finds would go unreported.",
    symptom="The required check is skipped with a reason that is not 'not implemented' or 'not defined'; the "
            "summary lists it under 'not measured'.",
    mechanism="The required check's skip carries the harness's reason (could_not_measure or harness_error), and "
              "no other required check's failure reports it.",
    fix="Nothing in your code is known to be wrong from this: the result is incomplete. Read the reason shown; if "
        "your code is supposed to work there (e.g. your adapter calls the model in its own way), ask your "
        "instructor, who can report it to mtxdiag's maintainers with the submission.",
    assignments=NAMES,
)


def diagnose(ev):
    gaps = [g for g in not_measured(ev.result) if not g["explained"]]
    if not gaps:
        return None
    names = ", ".join(g["id"] for g in gaps)
    return Finding(0.3, [f"{g['id']} was not measured: {g['why']}" for g in gaps],
                   next((g["location"] for g in gaps if g["location"]), None), explains=tuple(g["id"] for g in gaps),
                   title=f"The check is incomplete: {names} could not be measured")
