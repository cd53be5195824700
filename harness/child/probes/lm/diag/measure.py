"""How an `lm` property is measured and reported (used by properties.py and properties_train.py).

run() calls the student's adapter and turns anything but a tensor into Skip (a failed measurement is never
evidence); prop() is the measurement record; dependency() and causal_prop() measure which inputs each
output position depends on and name the causal-mask bug the pattern shows.
"""
from __future__ import annotations

import math

import torch

from .....readable import num


class Skip(Exception):
    """The measurement could not be made (the student's call raised or returned a non-tensor)."""


def run(fn, *args, **kw):
    try:
        with torch.no_grad():
            out = fn(*args, **kw)
    except Exception as e:                                   # noqa: BLE001 - reported by the interface step
        raise Skip(f"{type(e).__name__}: {e}") from None
    if not isinstance(out, torch.Tensor):
        raise Skip(f"returned {type(out).__name__}")
    return out.detach().double()


def prop(pid, component, what, measured, expected, passed, cause=None, confidence=0.6):
    if isinstance(measured, float):      # a NaN or an infinity is written out: never 'nan' in the report
        measured = round(measured, 6) if math.isfinite(measured) else num(measured)
    return {"id": pid.replace("_", "-"), "component": component, "what": what, "measured": measured,
            "expected": expected, "passed": bool(passed), "cause": None if passed else cause,
            "confidence": 0.0 if passed else confidence}


def dependency(outputs_fn, x, n):
    """dep[t][s]: does the output at t change when the input at s changes (s perturbed alone)."""
    base = outputs_fn(x)
    dep = []
    for s in range(n):
        xp = x.clone()
        xp[:, s] = xp[:, s] + 1.0 if xp.is_floating_point() else (xp[:, s] + 1) % 60
        diff = (outputs_fn(xp) - base).abs().amax(dim=(0, -1))       # (n,)
        dep.append([bool(v > 1e-6) or not bool(torch.isfinite(v)) for v in diff])
    return [[dep[s][t] for s in range(n)] for t in range(n)]


def causal_prop(component, dep, row0_finite=True):
    n = len(dep)
    future = [(t, s) for t in range(n) for s in range(t + 1, n) if dep[t][s]]
    past = [(t, s) for t in range(n) for s in range(t) if dep[t][s]]
    cause, conf = "future-tokens-visible", 0.6
    if not row0_finite:
        cause, conf = "causal-diagonal-masked", 0.7
    elif future and all(s == t + 1 for t, s in future) and len(future) == n - 1:
        cause, conf = "causal-mask-off-by-one", 0.85
    elif future and not past:
        cause, conf = "causal-mask-inverted", 0.8
    elif len(future) == n * (n - 1) // 2:
        cause, conf = "causal-mask-missing", 0.7
    passed = not future and row0_finite
    return prop(f"{component}-causal", component, "the output at t does not depend on tokens after t",
                f"{len(future)} (t, later s) pairs depend" + ("" if row0_finite else "; first position not finite"),
                "0", passed, cause, conf)
