"""A causal relative bias built symmetric (issue 48 item 4): the mechanism behind a causal leak with no mask.

A causal ALiBi-style attention carries its causality in the bias itself: -slope * (i - j) for the keys at or
before the query, -inf (or a large negative) for the keys ahead, and no separate mask. Built symmetric
(-slope * |i - j|, an abs()), the keys ahead get a finite distance penalty only, and every query attends to
the future. The weights above the diagonal show *that*; this finds *where*: the first op of the forward pass
whose output is a position-by-position table that does not depend on the tokens (the same in two runs with
different inputs), is finite everywhere, varies with the pair and mirrors itself (b[i, j] = b[j, i]): the
statement that builds the bias, its origin, not the softmax where it shows. Whether it joins the scores is
read from the ops that take it with a token-dependent tensor (an add of kept inputs: trace.KEEP_INPUTS).

A symmetric bias next to a causal mask is harmless (the future half is never read); the caller asks only
when the weights that multiply V already give later keys weight. Child side.
"""
from __future__ import annotations

import torch

from . import trace

MIRROR_TOL = 1e-6     # relative |b - b^T|: a symmetric table built by the code is exact (0.0 measured)
SPREAD_MIN = 1e-6     # a table that is one constant (ones, zeros) is no positional bias
JOINS = ("add", "__add__", "__radd__", "add_", "__iadd__", "sub", "__sub__", "scaled_dot_product_attention")


def _pair_table(t, size: int) -> bool:
    """A (..., size, size) table of numbers (a distance table may still be integers: abs of an arange)."""
    return isinstance(t, torch.Tensor) and t.dtype != torch.bool and not t.is_complex() and t.dim() >= 2 \
        and tuple(t.shape[-2:]) == (size, size)


def _symmetric(t: torch.Tensor) -> float | None:
    """|t - t^T| over the pair axes relative to t's size, or None when t is not a finite, varying table."""
    d = t.double()
    if not bool(torch.isfinite(d).all()):
        return None                     # -inf / large entries: a mask or a causal bias, not this bug
    scale = float(d.abs().max())
    if float(d.max() - d.min()) <= SPREAD_MIN * max(scale, 1.0):
        return None
    return float((d - d.transpose(-1, -2)).abs().max()) / max(scale, 1.0)


def _constant(ta, tb) -> bool:
    return ta.shape == tb.shape and bool(torch.equal(ta, tb))


def symmetric_bias(ctx, run, x_a, x_b, size: int) -> dict | None:
    """run(x) runs the forward pass on `size` tokens; x_a and x_b are two different inputs. The origin of a
    token-independent, finite, symmetric (size, size) table, where it joins the token-dependent scores, and
    its values (the mirror error, the spread of its future entries), or None when there is none."""
    ops_a = trace.record(ctx, lambda: run(x_a))
    ops_b = trace.record(ctx, lambda: run(x_b))
    origin = None
    for oa, ob in zip(ops_a, ops_b):
        if oa.name != ob.name or oa.line != ob.line:
            break                       # control flow differs: the two runs cannot be compared further
        for ta, tb in zip(oa.outs, ob.outs):
            if origin is None and _pair_table(ta, size) and _constant(ta, tb):
                mirror = _symmetric(ta)
                if mirror is not None and mirror <= MIRROR_TOL:
                    origin = (oa, ta, mirror)
        if origin is not None:
            break
    if origin is None or not origin[0].line:
        return None
    op, table, mirror = origin
    joined = _joined(ops_a, ops_b, op.index, size)
    lines = ctx.source.text.splitlines()
    code = lines[op.line - 1].strip() if 0 < op.line <= len(lines) else ""
    t = table.double().reshape(-1, size, size)[0]
    future = t.triu(1)[torch.ones(size, size, dtype=torch.bool).triu(1)]
    return {"line": op.line, "op": op.name, "code": code[:160], "mirror_error": round(mirror, 9),
            "future_finite": True, "future_min": round(float(future.min()), 4),
            "future_max": round(float(future.max()), 4),
            "joins_line": joined.line if joined else None, "joins_op": joined.name if joined else None}


def _is_bias(ia, ib, size: int) -> bool:
    if not (_pair_table(ia, size) and isinstance(ib, torch.Tensor) and _constant(ia, ib)):
        return False
    mirror = _symmetric(ia)
    return mirror is not None and mirror <= MIRROR_TOL


def _joined(ops_a, ops_b, start: int, size: int):
    """The first op after `start` that takes a token-independent symmetric table together with a token-
    dependent tensor and makes a token-dependent (size, size) output: where the bias joins the scores."""
    for oa, ob in zip(ops_a[start + 1:], ops_b[start + 1:]):
        if oa.name != ob.name or oa.line != ob.line:
            return None
        ins_a = list(oa.ins) + [v for v in oa.kwargs.values() if isinstance(v, torch.Tensor)]
        ins_b = list(ob.ins) + [v for v in ob.kwargs.values() if isinstance(v, torch.Tensor)]
        if oa.name not in JOINS or not ins_a or len(ins_a) != len(ins_b) or not oa.outs or not ob.outs:
            continue
        has_bias = any(_is_bias(ia, ib, size) for ia, ib in zip(ins_a, ins_b))
        varies = any(not _constant(ia, ib) for ia, ib in zip(ins_a, ins_b))
        out_a, out_b = oa.outs[0], ob.outs[0]
        if has_bias and varies and out_a.dim() >= 2 and not _constant(out_a, out_b):
            return oa
    return None
