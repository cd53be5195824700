"""Mutant fingerprints: does the student's component compute exactly what a known bug computes?

The reference adapter and every lm mutant of the component (and of the components it is built
from: a RoPE bug shows in the LM too) run on the same seeded inputs as the student's adapter,
draw after draw. A mutant whose outputs the student's equal to tolerance on every case of every
draw, while the reference's do not, is the diagnosis: both the symptom (the numbers differ) and
the mechanism (they are exactly the numbers of the described edit) are observed.

Mutant modules are built once per process with mutants/lm_export.load_module (our own code,
never the student's) and cached.
"""
from __future__ import annotations

from functools import lru_cache

from mutants.lm_export import load_module, mutant_single_file, reference_single_file
from mutants.lm_registry import by_component, lm_get

from .inputs import ADAPTER, canonical, cases, closure, difference, run_case, same_ending, tolerance

DRAWS = 5
CONFIDENCE = 0.95          # symptom and mechanism both observed on every draw


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


def fingerprint(component: str, student_fn, draws: int = DRAWS) -> dict | None:
    """The mutant the student's adapter matches on every draw, or None.

    Returns {cause, mutant, mutant_component, confidence, evidence, max_diff, draws, also}
    (`also`: other mutants that matched too; with different causes the confidence drops).
    """
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
    causes = {m.cause for m in hits}
    worst = alive[best.id][0]
    where = "" if best.component == comp else f" (a bug in {best.component}, which {comp} is built from)"
    evidence = [f"equals the reference with the edit '{best.summary}'{where} to {worst:.1g} "
                f"on {draws} draws of {len(cases(comp, 0))} case(s) each; the reference differs"]
    if len(causes) > 1:
        evidence.append("also matches: " + "; ".join(f"{m.id} ({m.cause})" for m in hits[1:]))
    return {"cause": best.cause, "mutant": best.id, "mutant_component": best.component,
            "confidence": CONFIDENCE if len(causes) == 1 else 0.6, "evidence": evidence,
            "max_diff": worst, "draws": draws, "also": [m.id for m in hits[1:]]}
