"""One `lm` component's diagnosis: pass, not implemented, or the failure and its most likely cause.

Order of the explanations, strongest evidence first:
  1. interface: the adapter raised with a message that names keys/shapes of the contract, returned
     None, returned an integer tensor, or adds a bias (cause `interface-mismatch`, never numerical);
  2. fingerprint: the outputs equal a known mutant's on every draw (confidence 0.95);
  3. interface again: the outputs equal the reference's with two adapter arguments exchanged;
  4. properties: what every correct implementation satisfies and this one does not;
  5. otherwise the measured disagreement, with no cause ("no known cause matches").

The result is JSON-able: {component, adapter, status: pass|fail|not-implemented, cause,
confidence, evidence: [str], errors: {case, max_abs, max_rel} | {case, raised}, properties: [...]}.
"""
from __future__ import annotations

import contextlib
import math
import random

import numpy as np
import torch

from . import interface, properties, properties_train  # noqa: F401 - registers the training properties
from .fingerprint import fingerprint, outputs, reference_fn
from .inputs import ADAPTER, COMPONENTS, canonical, closure, relative_error, tolerance

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


def _result(comp, status, cause=None, confidence=0.0, evidence=(), errors=None, props=(), **extra):
    return jsonable({"component": comp, "adapter": ADAPTER[comp], "status": status, "cause": cause,
                     "confidence": round(float(confidence), 3), "evidence": list(evidence), "errors": errors,
                     "properties": list(props), **extra})


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


def _error_line(err):
    if err is None:
        return ""
    if "raised" in err:
        return f"{err['case']}: {err['raised']}"
    if err["shape"] != err["expected_shape"]:
        return f"{err['case']}: output shape {err['shape']}, expected {err['expected_shape']}"
    return (f"{err['case']}: max abs error {err['max_abs']:.3g}, relative {err['max_rel']:.3g} against the "
            "reference")


@contextlib.contextmanager
def _rng_kept():
    """The global random states as they were (the seeded draws must not change the caller's randomness)."""
    states = (random.getstate(), np.random.get_state(), torch.get_rng_state())
    try:
        yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])


def diagnose_component(component: str, student_fn) -> dict:
    """The component's diagnosis (see the module docstring); never raises for the student's behaviour."""
    comp = canonical(component)
    try:
        with _rng_kept():
            return _diagnose(comp, student_fn)
    except Exception as e:                                   # noqa: BLE001 - a diagnosis must not crash a check
        return _result(comp, "fail", None, 0.0, [f"mtxdiag could not finish this component's diagnosis: "
                                                 f"{type(e).__name__}: {str(e)[:200]}"], internal_error=True)


def _diagnose(comp, student_fn):
    if student_fn is None:
        return _result(comp, "not-implemented", evidence=[f"{ADAPTER[comp]} is not defined"])
    err, mine = compare(comp, student_fn)
    if err is None:
        return _result(comp, "pass", evidence=[f"agrees with the reference on {CHECK_DRAWS} draws of every case"])
    if any(o == "not-implemented" for _, o in mine) or err.get("raised") == "not-implemented":
        return _result(comp, "not-implemented", evidence=[f"{ADAPTER[comp]} raises NotImplementedError"])
    where = _error_line(err)
    recorded, names = interface.recorded_args(comp)
    case_args = {case: a for case, a, _ in recorded}
    # 1. interface problems seen directly
    found = interface.output_problems(comp, mine)
    if found is None and "raised" in err:
        found = interface.from_exception(comp, err["raised"], case_args.get(err["case"], ()), names)
    found = found or interface.raw_dtype(comp, student_fn) or interface.zero_in_zero_out(comp, student_fn)
    if found:
        return _result(comp, "fail", found["cause"], found["confidence"], found["evidence"] + [where], err,
                       interface=found["kind"])
    # 2. a known bug's exact numbers
    fp = fingerprint(comp, student_fn)
    if fp:
        return _result(comp, "fail", fp["cause"], fp["confidence"], fp["evidence"] + [where], err,
                       mutant=fp["mutant"], mutant_component=fp["mutant_component"])
    # 3. the reference with two arguments exchanged
    swapped = interface.swapped_arguments(comp, student_fn)
    if swapped:
        return _result(comp, "fail", swapped["cause"], swapped["confidence"], swapped["evidence"] + [where], err,
                       interface=swapped["kind"])
    # 4. properties
    props = properties.check(comp, student_fn)
    failed = sorted((p for p in props if not p["passed"]), key=lambda p: -p["confidence"] if p["cause"] else 1)
    lines = [f"{p['id']}: measured {p['measured']}, expected {p['expected']} ({p['what']})" for p in failed]
    named = [p for p in failed if p["cause"]]
    if named:
        return _result(comp, "fail", named[0]["cause"], named[0]["confidence"], lines + [where], err, props)
    # 5. honest: measured, no cause
    if "raised" in err:
        return _result(comp, "fail", None, 0.0, lines + [f"raised on {where}; no known cause matches"], err, props)
    return _result(comp, "fail", None, 0.0, lines + [f"disagrees with the reference on {where}; no known cause "
                                                     "matches"], err, props)


def diagnose_adapters(adapters: dict, components=COMPONENTS, explain_downstream: bool = False) -> dict:
    """Every component's diagnosis and the first failing one in build order (where the bug starts).

    A component that fails while one it is built from fails too is only compared, not explained
    (its failure is normally that one's; `explain_downstream` explains it anyway)."""
    results = {}
    for c in components:
        fn = adapters.get(ADAPTER[c])
        upstream = [u for u in closure(c) if u != c and results.get(u, {}).get("status") == "fail"]
        if upstream and fn is not None and not explain_downstream:
            try:
                err, mine = compare(c, fn)
            except Exception:                                # noqa: BLE001 - explained below instead
                err, mine = {"case": "?", "raised": "comparison failed"}, []
            if err is not None and not any(o == "not-implemented" for _, o in mine):
                results[c] = _result(c, "fail", None, 0.0, [f"fails, and {upstream[0]}, which it is built from, "
                                                            f"fails too (explained there)", _error_line(err)], err,
                                     inherited_from=upstream[0])
                continue
        results[c] = diagnose_component(c, fn)
    failing = [c for c in components if results[c]["status"] == "fail"]
    return {"components": results, "first_failing": failing[0] if failing else None}
