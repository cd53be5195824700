"""The layer role (an encoder or decoder layer: forward(x[, memory][, mask]) -> x's shape): called as the course
calls it, with its mask and without it; the reference's output given the student's weights (eval), with the
submodules called in the reference's order; the mask blocks (a later position moves no earlier output); dropout
only in training. Each failure says what was observed and the student's line."""
from __future__ import annotations

import ast

import torch

from . import bounds, observe
from .attention import encode, kinds
from .support import (StudentFailure, assigned_before, build, calls, diff, guarded, lines_reading, make, method,
                      params, randn, received_mask, run, trace, twin)


def sizes(rctx):
    s = rctx.binding.shapes
    return s.get("N", 2), s.get("T", 5), s.get("S", 3), s.get("E", 8)


def data(rctx, offset=0):
    n, t, s, e = sizes(rctx)
    return randn(rctx, n, t, e, offset=offset + 1), randn(rctx, n, s, e, offset=offset + 2)


def causal_mask(rctx):
    t = sizes(rctx)[1]
    return encode(rctx, torch.tril(torch.ones(t, t, dtype=torch.bool)), (kinds(rctx) or ("bool",))[0])


def args_of(rctx, x, memory, mask, with_mask: bool = True) -> list:
    given = {"x": x, "memory": memory, "mask": mask}
    roles = [r for r in (rctx.binding.call or ("x", "mask")) if with_mask or r != "mask"]
    return [given.get(r) for r in roles]


def forward(rctx, m, x, memory, mask, with_mask: bool = True):
    out = run(rctx, f"{rctx.binding.component}.forward", m, *args_of(rctx, x, memory, mask, with_mask))
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"forward returned {type(out).__name__}, not a tensor")
    return out


def returned(rctx) -> int | None:
    fwd = method(rctx, "forward")
    rets = sorted(n.lineno for n in ast.walk(fwd) if isinstance(n, ast.Return)) if fwd else []
    return rets[-1] if rets else None


def mask_param(rctx) -> ast.arg | None:
    """The forward's parameter the mask is passed to (by the binding's call order) and its default."""
    fwd = method(rctx, "forward")
    roles = list(rctx.binding.call or ())
    if fwd is None or "mask" not in roles:
        return None
    args = fwd.args.args[1:]
    i = roles.index("mask")
    return args[i] if i < len(args) else None


def mask_default(rctx):
    """The mask parameter's default expression (ast) and its line, or (None, None) without one."""
    fwd, p = method(rctx, "forward"), mask_param(rctx)
    if fwd is None or p is None:
        return None, None
    args = fwd.args.args[1:]
    defaults = fwd.args.defaults
    i = args.index(p) - (len(args) - len(defaults))
    return (defaults[i], defaults[i].lineno) if i >= 0 else (None, None)


@guarded("call")
def call(rctx):
    n, t, s, e = sizes(rctx)
    m = build(rctx)
    x, memory = data(rctx)
    expected = f"a ({n}, {t}, {e}) tensor with the mask and without it (the mask's default)"
    out = forward(rctx, m, x, memory, causal_mask(rctx))
    if tuple(out.shape) != (n, t, e):
        text = f"the output's shape is {list(out.shape)}"
        return [make(rctx, "call", "fail", str(list(out.shape)), expected, text,
                     {"mechanism": {"kind": "shape", "text": text}}, returned(rctx))]
    if "mask" not in (rctx.binding.call or ()):
        return [make(rctx, "call", "pass", "ok", expected)]
    try:
        forward(rctx, m, x, memory, None, with_mask=False)
    except StudentFailure as f:     # the call the course makes without a mask raises
        default, line = mask_default(rctx)
        if default is not None and not (isinstance(default, ast.Constant) and default.value is None):
            kind = "mask-default"
            text = f"called without a mask it raises ({f}): the mask's default is `{ast.unparse(default)}`, not None"
        else:
            kind, line = "none-mask-fails", getattr(f, "line", None)
            text = f"called without a mask (None) it raises: {f}"
        return [make(rctx, "call", "fail", "raises", expected, text, {"mechanism": {"kind": kind, "text": text}},
                     line)]
    return [make(rctx, "call", "pass", "ok", expected)]


def call_line(rctx, name: str) -> int | None:
    """The student's forward statement that calls self.<name>."""
    hits = [c for c in calls(method(rctx, "forward"), name) if ast.unparse(c.func) == f"self.{name}"]
    return hits[0].lineno if hits else None


@guarded("reference")
def reference(rctx):
    m = build(rctx)
    ref = twin(rctx, m)
    if ref is None:
        return [make(rctx, "reference", "skip", detail="the parameters' names differ from the reference's")]
    x, memory = data(rctx)
    mask = causal_mask(rctx)
    mine = trace(m, lambda: forward(rctx, m, x, memory, mask))
    theirs = trace(ref, lambda: ref(*args_of(rctx, x, memory, mask)))
    d = diff(forward(rctx, m, x, memory, mask), ref(*args_of(rctx, x, memory, mask)))
    expected = f"the reference's output given the student's weights, in eval (within {bounds.SAME})"
    if d <= bounds.SAME:
        return [make(rctx, "reference", "pass", d, expected)]
    order_m, order_r = [r[0] for r in mine], [r[0] for r in theirs]
    if order_m != order_r and sorted(order_m) == sorted(order_r):
        at = next(i for i, (a, b) in enumerate(zip(order_m, order_r)) if a != b)
        kind = "order"
        text = f"the submodules run in another order: {', '.join(order_m)} (the reference: {', '.join(order_r)})"
        line = call_line(rctx, order_m[at])
    else:
        ref_rows = {r[0]: r for r in theirs}
        kind, text, line = "output", "the output differs after the last submodule", None
        for name, inp, out in mine:
            r = ref_rows.get(name)
            if r is None:
                continue
            if inp is not None and r[1] is not None and diff(inp, r[1]) > bounds.SAME:
                kind, text = "input", f"the input the layer hands {name} differs from the reference's"
                line = assigned_before(rctx, name)
                break
            if out is not None and r[2] is not None and diff(out, r[2]) > bounds.SAME:
                kind, text, line = "module", f"{name}'s output differs from the reference's", call_line(rctx, name)
                break
    return [make(rctx, "reference", "fail", d, expected, text, {"mechanism": {"kind": kind, "text": text}}, line)]


@guarded("mask")
def mask(rctx):
    n, t, s, e = sizes(rctx)
    if "mask" not in (rctx.binding.call or ()):
        return [make(rctx, "mask", "skip", detail="the binding passes no mask")]
    m = build(rctx)
    x, memory = data(rctx)
    mk = causal_mask(rctx)
    base = forward(rctx, m, x, memory, mk)
    p = t - 2
    x2 = x.clone()
    x2[:, p] += bounds.PERTURB * randn(rctx, n, e, offset=40)
    moved = (forward(rctx, m, x2, memory, mk) - base).detach().abs().amax(dim=(0, 2))
    leak = float(moved[:p].max())
    expected = f"under the lower-triangular mask, changing position {p} moves no earlier position's output"
    if leak <= bounds.SAME and not torch.isnan(base).any():
        return [make(rctx, "mask", "pass", leak, expected)]
    if not received_mask(m, mk, lambda: forward(rctx, m, x, memory, mk)):
        fwd = method(rctx, "forward")
        x_name = (params(fwd) + ["x"])[0]
        reads = lines_reading(fwd, x_name)
        kind, text, line = "not-passed", "the layer's mask reaches none of its submodules: the self-attention " \
            "runs unmasked", reads[0] if reads else None
    else:
        kind, text, line = "leaks", "the mask reaches the attention and earlier positions still move", None
    return [make(rctx, "mask", "fail", float(f"{leak:.3g}") if leak == leak else "nan", expected, text,
                 {"mechanism": {"kind": kind, "text": text}}, line)]


@guarded("dropout")
def dropout(rctx):
    m = build(rctx, dropout=0.5)
    x, memory = data(rctx)
    mk = causal_mask(rctx)
    d_eval = diff(forward(rctx, m, x, memory, mk), forward(rctx, m, x, memory, mk))
    m.train()
    d_train = diff(forward(rctx, m, x, memory, mk), forward(rctx, m, x, memory, mk))
    m.eval()
    expected = "eval (dropout 0.5): two passes agree exactly; training: they differ"
    if d_eval == 0.0 and d_train > 0.0:
        return [make(rctx, "dropout", "pass", d_train, expected)]
    if d_eval != 0.0:
        drops = [o for o in observe.dropouts(m, lambda: forward(rctx, m, x, memory, mk)) if o[0] == "dropout" and o[3]]
        kind, text = "dropout-in-eval", "two passes in eval mode differ: a dropout call is told it trains"
        line = drops[0][1] if drops else None
    else:
        kind, text, line = "dropout-missing", "two passes in training agree: no dropout is applied", None
    return [make(rctx, "dropout", "fail", d_eval if d_eval else d_train, expected, text,
                 {"mechanism": {"kind": kind, "text": text}}, line)]


PROBES_SPEC = (("call", call, "quick"), ("reference", reference, "quick"), ("mask", mask, "quick"),
               ("dropout", dropout, "quick"))
