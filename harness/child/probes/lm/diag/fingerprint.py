"""Mutant fingerprints: does the student's component compute exactly what a known bug computes?

The reference adapter and every lm mutant of the component (and of the components it is built
from: a RoPE bug shows in the LM too) run on the same seeded inputs as the student's adapter,
draw after draw. A mutant whose outputs the student's equal to tolerance on every case of every
draw, while the reference's do not, is the diagnosis: both the symptom (the numbers differ) and
the mechanism (they are exactly the numbers of the described edit) are observed. This module measures
the match; the parent's harness/causes/lm_decide.py names the cause and its confidence.

Mutant modules are built once per process with mutants/lm_export.load_module (our own code,
never the student's) and cached.
"""
from __future__ import annotations

from functools import lru_cache

from mutants.lm_export import load_module, mutant_single_file, reference_single_file
from mutants.lm_registry import by_component, lm_get

from .....causes import lm_decide
from .inputs import ADAPTER, canonical, cases, closure, difference, run_case, same_ending, tolerance

DRAWS = 5


@lru_cache(maxsize=None)
def variant(mutant_id: str | None):
    """The single-file module of the reference (None) or of one lm mutant."""
    if mutant_id is None:
        return load_module(reference_single_file(), "mtx_lmdiag_reference")
    text = mutant_single_file(lm_get(mutant_id))
    return load_module(text, "mtx_lmdiag_" + mutant_id.replace("-", "_"))


def reference_fn(component: str):
    return getattr(variant(None), ADAPTER[canonical(component)])


def candidates(component: str):
    """The mutants that can explain a disagreement of this component: its own, then upstream ones."""
    comp = canonical(component)
    own = list(by_component(comp))
    return own + [m for c in closure(comp) if c != comp for m in by_component(c)]


def outputs(component: str, draw: int, fn) -> list[tuple[str, object]]:
    """[(case, output)] of fn on one draw; the inputs are rebuilt for every callee (in-place edits stay theirs)."""
    return [(name, run_case(call, fn)) for name, call in cases(component, draw)]


def _match(student, other, component) -> tuple[bool, float, bool]:
    """(outputs agree on every case, largest numeric difference, at least one case agreed numerically)."""
    worst, numeric = 0.0, False
    for (case, s), (_, o) in zip(student, other):
        d = difference(s, o)
        if d is None:
            if not same_ending(s, o):
                return False, worst, numeric
            continue
        if d > tolerance(component, case, o):
            return False, worst, numeric
        worst, numeric = max(worst, d), True
    return True, worst, numeric


def match(component: str, student_fn, draws: int = DRAWS) -> dict | None:
    """The mutant the student's adapter matches on every draw, as measured, or None.

    Returns {mutant, mutant_component, max_diff, draws, cases, also} (`also`: the other mutants that matched
    too, in candidate order). What it names, and how surely, is the parent's (causes/lm_decide.py)."""
    comp = canonical(component)
    pool = candidates(comp)
    alive = {m.id: [0.0, False] for m in pool}      # mutant -> [largest difference, any numeric agreement]
    differs_from_reference = False
    for draw in range(draws):
        mine = outputs(comp, draw, student_fn)
        ok, _, _ = _match(mine, outputs(comp, draw, reference_fn(comp)), comp)
        differs_from_reference |= not ok
        for mid in list(alive):
            theirs = outputs(comp, draw, getattr(variant(mid), ADAPTER[comp]))
            same, worst, numeric = _match(mine, theirs, comp)
            if not same:
                del alive[mid]
                continue
            alive[mid][0] = max(alive[mid][0], worst)
            alive[mid][1] |= numeric
        if not alive or (draw == 0 and not differs_from_reference):
            return None                             # matches no mutant, or agrees with the reference here
    if not differs_from_reference:
        return None
    hits = [lm_get(mid) for mid, (_, numeric) in alive.items() if numeric]
    if not hits:
        return None
    best = hits[0]                                  # the component's own mutants come first
    return {"mutant": best.id, "mutant_component": best.component, "max_diff": alive[best.id][0], "draws": draws,
            "cases": len(cases(comp, 0)), "also": [m.id for m in hits[1:]]}


def fingerprint(component: str, student_fn, draws: int = DRAWS) -> dict | None:
    """The known bug the student's adapter reproduces, or None: match() decided by the parent's rule
    ({cause, mutant, mutant_component, confidence, evidence, max_diff, draws, also})."""
    return lm_decide.fingerprint_finding(canonical(component), match(component, student_fn, draws))
