"""The feed-forward role (a position-wise feed-forward: forward(x) -> x's shape): the output keeps the input's
shape; the output at token i depends on token i alone (one token perturbed: only its row moves); it is not affine
(an activation between its linear maps); deterministic in eval and dropping in training; the reference's output
given the student's weights, the first submodule whose output leaves the reference's locating the line."""
from __future__ import annotations

import torch

from ..base import Skip
from . import bounds, observe
from .layer import call_line
from .model import first_divergence
from .support import build, diff, guarded, make, method, randn, run, trace, twin


def sizes(rctx):
    s = rctx.binding.shapes
    return s.get("N", 2), s.get("T", 5), s.get("E", 8)


def data(rctx, offset=0):
    n, t, e = sizes(rctx)
    return randn(rctx, n, t, e, offset=offset + 1)


def forward(rctx, m, x):
    out = run(rctx, f"{rctx.binding.component}.forward", m, x)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"forward returned {type(out).__name__}, not a tensor")
    return out


def deterministic(rctx, m, x):
    """The forward in eval; a Skip when two passes differ (the dropout check measures that)."""
    out = forward(rctx, m, x)
    if diff(out, forward(rctx, m, x)) != 0.0:
        raise Skip("two passes in eval mode differ (see dropout): a comparison of passes means nothing")
    return out


def last_call(rctx, m, x) -> int | None:
    """The student's forward statement that calls the last submodule forward runs (the output's), else the
    forward's last line."""
    rows = trace(m, lambda: forward(rctx, m, x))
    line = call_line(rctx, rows[-1][0]) if rows else None
    fwd = method(rctx, "forward")
    return line or (fwd.body[-1].lineno if fwd is not None and fwd.body else None)


@guarded("shape")
def shape(rctx):
    n, t, e = sizes(rctx)
    m = build(rctx)
    x = data(rctx)
    out = forward(rctx, m, x)
    expected = f"the input's shape ({n}, {t}, {e})"
    if tuple(out.shape) == (n, t, e):
        return [make(rctx, "shape", "pass", list(out.shape), expected)]
    text = f"the output's shape is {list(out.shape)}"
    fwd = method(rctx, "forward")
    return [make(rctx, "shape", "fail", str(list(out.shape)), expected, text,
                 {"mechanism": {"kind": "shape", "text": text}}, fwd.body[-1].lineno if fwd and fwd.body else None)]


@guarded("position-wise")
def position_wise(rctx):
    n, t, e = sizes(rctx)
    m = build(rctx)
    x = data(rctx)
    p = t // 2
    x2 = x.clone()
    x2[:, p] += bounds.PERTURB * randn(rctx, n, e, offset=40)
    base, moved_out = deterministic(rctx, m, x), forward(rctx, m, x2)
    moved = (moved_out - base).detach().abs().double().amax(dim=(0, 2)).cpu()
    others = [i for i in range(t) if i != p and float(moved[i]) > bounds.SAME]
    own = float(moved[p])
    expected = f"changing token {p} moves its own row (> {bounds.MOVED}) and no other row (<= {bounds.SAME})"
    if not others and own > bounds.MOVED:
        return [make(rctx, "position-wise", "pass", float(f"{own:.3g}"), expected)]
    if others:
        kind, text = "mixes-positions", f"changing token {p} moves the output at tokens {others}: the " \
            "feed-forward mixes positions"
        b_rows = {r[0]: r[2] for r in trace(m, lambda: forward(rctx, m, x))}
        first = None
        for name, _, out in trace(m, lambda: forward(rctx, m, x2)):
            ref = b_rows.get(name)
            if isinstance(out, torch.Tensor) and isinstance(ref, torch.Tensor) and out.shape == ref.shape and \
                    out.dim() >= 2 and out.shape[1] == t and \
                    any(diff(out[:, i], ref[:, i]) > bounds.SAME for i in range(t) if i != p):
                first = name
                break
        line = call_line(rctx, first) if first else last_call(rctx, m, x)
    else:
        kind, text, line = "token-ignored", f"changing token {p} does not move its own output row", \
            last_call(rctx, m, x)
    return [make(rctx, "position-wise", "fail", others or float(f"{own:.3g}"), expected, text,
                 {"mechanism": {"kind": kind, "text": text, "token": p, "moved": others}}, line)]


@guarded("nonlinear")
def nonlinear(rctx):
    m = build(rctx)
    a, b = data(rctx, offset=10), data(rctx, offset=20)
    deterministic(rctx, m, a)
    fa, fb, fab, f0 = (forward(rctx, m, v) for v in (a, b, a + b, torch.zeros_like(a)))
    err = diff(fab, fa + fb - f0)
    expected = f"f(a + b) differs from f(a) + f(b) - f(0) by > {bounds.MOVED} (an activation between the linear maps)"
    if err > bounds.MOVED:
        return [make(rctx, "nonlinear", "pass", float(f"{err:.3g}"), expected)]
    text = f"f(a + b) = f(a) + f(b) - f(0) within {err:.1e}: the feed-forward is affine (no activation between " \
        "its linear maps)"
    return [make(rctx, "nonlinear", "fail", float(f"{err:.3g}"), expected, text,
                 {"mechanism": {"kind": "affine", "text": text}}, last_call(rctx, m, a))]


@guarded("dropout")
def dropout(rctx):
    m = build(rctx, dropout=0.5)
    x = data(rctx)
    d_eval = diff(forward(rctx, m, x), forward(rctx, m, x))
    m.train()
    d_train = diff(forward(rctx, m, x), forward(rctx, m, x))
    m.eval()
    expected = "eval (dropout 0.5): two passes agree exactly; training: they differ"
    if d_eval == 0.0 and d_train > 0.0:
        return [make(rctx, "dropout", "pass", d_train, expected)]
    if d_eval != 0.0:
        drops = [o for o in observe.dropouts(m, lambda: forward(rctx, m, x)) if o[0] == "dropout" and o[3]]
        kind, text = "dropout-in-eval", "two passes in eval mode differ: a dropout call is told it trains"
        line = drops[0][1] if drops else None
    else:
        kind, text, line = "dropout-missing", "two passes in training agree: no dropout is applied", \
            last_call(rctx, m, x)
    return [make(rctx, "dropout", "fail", d_eval if d_eval else d_train, expected, text,
                 {"mechanism": {"kind": kind, "text": text}}, line)]


@guarded("reference")
def reference(rctx):
    m = build(rctx)
    ref = twin(rctx, m)
    if ref is None:
        return [make(rctx, "reference", "skip", detail="the parameters' names differ from the reference's")]
    x = data(rctx)
    d = diff(deterministic(rctx, m, x), ref(x))
    expected = f"the reference's output given the student's weights, in eval (within {bounds.SAME})"
    if d <= bounds.SAME:
        return [make(rctx, "reference", "pass", d, expected)]
    name = first_divergence(m, ref, lambda: forward(rctx, m, x), lambda: ref(x))
    top = name.split(".")[0] if name else None
    line = (call_line(rctx, top) if top else None) or last_call(rctx, m, x)
    text = f"the first submodule whose output leaves the reference's: {name}" if name else \
        "the output differs from the reference's after the last submodule"
    return [make(rctx, "reference", "fail", d, expected, text,
                 {"mechanism": {"kind": "diverges", "module": name, "text": text}}, line)]


PROBES_SPEC = (("shape", shape, "quick"), ("position-wise", position_wise, "quick"),
               ("nonlinear", nonlinear, "quick"), ("dropout", dropout, "quick"), ("reference", reference, "quick"))
