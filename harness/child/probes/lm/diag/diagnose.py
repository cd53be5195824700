"""One `lm` component, measured: pass, not implemented, or the failure and every measurement that can explain it.

`measure_component` runs in the sandboxed child (harness/child/probes/lm/components.py) and returns numbers, never a
cause: the first disagreement with the reference (`err`), the interface findings with the stage that found
each (output problems, the exception's keys/shapes/arguments, the output dtype, zero in -> zero out, the
reference with two arguments exchanged), the lm mutant whose outputs the adapter reproduces (`fingerprint`)
and the properties (each with the cause its failure names as declared data). Every stage is measured for a
failing component, in the order the decision reads them; a stage that could not be measured is listed in
`not_measured` with the reason. The decision (which evidence names which cause, at what confidence, in which
order) is the parent's: harness/causes/lm_decide.py, torch-free. `diagnose_component` is measure-then-decide
in one process (the pytest plugin, the benches and tests) through that same function.

A diagnosis is JSON-able: {component, adapter, status: pass|fail|not-implemented, cause, confidence,
evidence: [str], errors: {case, max_abs, max_rel} | {case, raised}, properties: [...]}.
"""
from __future__ import annotations

import contextlib
import math
import random
import time

import numpy as np
import torch

from .....readable import cut
from .....causes import lm_decide
from . import interface, properties, properties_train  # noqa: F401 - registers the training properties
from .fingerprint import match, outputs, reference_fn
from .inputs import ADAPTER, COMPONENTS, canonical, relative_error, tolerance

CHECK_DRAWS = 2          # draws compared with the reference before a component is called correct


def jsonable(x):
    """Plain JSON (no NaN/inf: those become strings) of a diagnosis."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return str(x)


def compare(comp, student_fn):
    """(first disagreement or None, the student's draw-0 outputs).

    A disagreement is {case, max_abs, max_rel, shape, expected_shape, draw} or {case, raised, draw}."""
    first = None
    mine0 = None
    for draw in range(CHECK_DRAWS):
        mine = outputs(comp, draw, student_fn)
        ref = outputs(comp, draw, reference_fn(comp))
        mine0 = mine0 or mine
        for (case, m), (_, r) in zip(mine, ref):
            if isinstance(m, str):
                return {"case": case, "raised": m, "draw": draw}, mine0
            abs_err, rel_err = relative_error(m, r)
            if abs_err is None or abs_err > tolerance(comp, case, r):
                first = first or {"case": case, "max_abs": abs_err, "max_rel": rel_err, "draw": draw,
                                  "shape": [list(t.shape) for t in m], "expected_shape": [list(t.shape) for t in r]}
        if first:
            return first, mine0
    return None, mine0


@contextlib.contextmanager
def rng_kept():
    """The global random states as they were (the seeded draws must not change the caller's randomness)."""
    states = (random.getstate(), np.random.get_state(), torch.get_rng_state())
    try:
        yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])


def measure_component(component: str, student_fn, timings: dict | None = None) -> dict:
    """The component's measurements (see the module docstring), JSON-able; never raises for the student's
    behaviour (a failure of mtxdiag's own is `internal_error`). `timings`, when given, gets each stage's
    seconds (bench/lm_measure_cost.py; never sent: the payload stays the same from run to run)."""
    comp = canonical(component)
    try:
        with rng_kept():
            return jsonable(_measure(comp, student_fn, {} if timings is None else timings))
    except Exception as e:                                   # noqa: BLE001 - a diagnosis must not crash a check
        return jsonable({"component": comp, "adapter": ADAPTER[comp], "status": "fail", "draws": CHECK_DRAWS,
                         "internal_error": f"{type(e).__name__}: {cut(e, 200)}"})


def _measure(comp, student_fn, timings) -> dict:
    base = {"component": comp, "adapter": ADAPTER[comp], "draws": CHECK_DRAWS}
    if student_fn is None:
        return dict(base, status="not-implemented", why="not-defined")
    t = time.perf_counter()
    err, mine = compare(comp, student_fn)
    timings["compare"] = time.perf_counter() - t
    if err is None:
        return dict(base, status="pass")
    if any(o == "not-implemented" for _, o in mine) or err.get("raised") == "not-implemented":
        return dict(base, status="not-implemented", why="raises")
    recorded, names = interface.recorded_args(comp)
    case_args = {case: a for case, a, _ in recorded}
    found, not_measured = [], {}

    def stage(name, measure):
        """One stage, in the order the decision reads them; mtxdiag's own failure there is not a finding."""
        t = time.perf_counter()
        try:
            return measure()
        except Exception as e:                               # noqa: BLE001 - recorded as not measured
            not_measured[name] = f"{type(e).__name__}: {cut(e, 200)}"
            return None
        finally:
            timings[name] = time.perf_counter() - t
    for name, measure in (
            ("output", lambda: interface.output_problems(comp, mine)),
            ("exception", lambda: interface.from_exception(comp, err["raised"], case_args.get(err["case"], ()), names)
             if "raised" in err else None),
            ("dtype", lambda: interface.raw_dtype(comp, student_fn)),
            ("zero-input", lambda: interface.zero_in_zero_out(comp, student_fn))):
        f = stage(name, measure)
        if f:
            found.append({"stage": name, "kind": f["kind"], "evidence": f["evidence"]})
    fp = stage("fingerprint", lambda: match(comp, student_fn))
    swapped = stage("swapped", lambda: interface.swapped_arguments(comp, student_fn))
    if swapped:
        found.append({"stage": "swapped", "kind": swapped["kind"], "evidence": swapped["evidence"]})
    props = stage("properties", lambda: properties.check(comp, student_fn))
    return dict(base, status="fail", err=err, interface=found, fingerprint=fp, properties=props or [],
                not_measured=not_measured)


def diagnose_component(component: str, student_fn) -> dict:
    """The component's diagnosis: its measurements, decided by the parent's rules (causes/lm_decide.py)."""
    m = measure_component(component, student_fn)
    valid = lm_decide.validate(m)
    if valid is None:                                        # our own measurement, malformed: say so
        return lm_decide.result({"component": canonical(component)}, "fail", None, 0.0,
                                ["mtxdiag could not finish this component's diagnosis: malformed measurements"],
                                internal_error=True)
    return lm_decide.decide(valid)


def first_failing(adapters: dict, components=COMPONENTS) -> tuple[str | None, dict]:
    """The first component in build order that does not pass, and its diagnosis ((None, {}) when all pass):
    where the bug starts, without diagnosing what is built on it."""
    for c in components:
        d = diagnose_component(c, adapters.get(ADAPTER[c]))
        if d["status"] == "fail":
            return c, d
    return None, {}


def diagnose_adapters(adapters: dict, components=COMPONENTS) -> dict:
    """Every component's diagnosis and the first failing one in build order (where the bug starts).

    Each failing component is diagnosed on its own measurements: in one process there is no traced run to
    show that its failure starts inside a component it is built from, so none is folded into another (the
    check path folds only on that measurement: harness/causes/lm_component.py `folded_into`)."""
    results = {c: diagnose_component(c, adapters.get(ADAPTER[c])) for c in components}
    failing = [c for c in components if results[c]["status"] == "fail"]
    return {"components": results, "first_failing": failing[0] if failing else None}
