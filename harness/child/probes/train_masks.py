"""The causal mask in training: a masked position gets no attention weight in train mode either.

The leakage test (attention.leakage) runs in eval mode, where dropout is off. A dropout applied to the masked
scores before the softmax (softmax(dropout(scores.masked_fill(~mask, -1e9)))) is invisible there, and in
training it sets some of the -1e9 entries to 0: those future (or padded) keys get a real share of the weight,
and the model learns from tokens it will not have at generation time. Measured here in train mode: two passes
with the same dropout masks (the RNG seeded alike; a changed token does not change what is drawn), the second
with one later decoder token changed; no earlier output may move. The mechanism: a dropout op whose output
still holds masked scores (values at or under masked_below): the mask was applied before the dropout, and the
dropout zeroes some of them. Its line is where the wrong weights are made.
"""
from __future__ import annotations

import torch

from ...checks import bound, num, value
from . import trace
from .base import Skip, check, manual_seed, rnd
from .common import batch, kwargs_for
from .randomness import DROPOUT_OPS


def _model(ctx):
    cls = ctx.need("MiniTransformer")
    model = ctx.model(**kwargs_for(cls, dropout=value("causal-leak-train", "dropout")))
    return model.train()


def masked_score_dropouts(ops: list) -> list:
    """The dropout ops whose output holds masked scores (<= masked_below, or -inf): dropout after the mask."""
    below = value("causal-leak-train", "masked_below")
    out = []
    for op in ops:
        if op.name in DROPOUT_OPS and op.outs and op.outs[0].is_floating_point():
            t = op.outs[0]
            if bool((t <= below).any()) and bool((t == 0).any()):
                out.append(op)
    return out


def leak_in_training(ctx):
    """Earlier outputs in train mode, same dropout masks, when one later decoder token changes."""
    model = _model(ctx)
    src, tgt = batch(ctx, 1, 8, 8, seed_offset=3)
    tgt_in = tgt[:, :-1]
    T = tgt_in.size(1)
    seed = ctx.seed * 7 + 1

    def run(t):
        manual_seed(seed)                      # the same dropout masks in every pass
        return ctx.forward(model, src, t)[0]
    with torch.no_grad():
        base = run(tgt_in)
        if not torch.isfinite(base).all():
            return [check("causal-leak-train", "skip", None, _expected(), "the train-mode logits are not finite "
                          "(measured by padded-row-finite and the training trace)")]
        again = run(tgt_in)
        if not torch.equal(base, again):
            raise Skip("two train-mode passes with the same RNG state differ: the dropout masks cannot be held "
                       "fixed")
        future, worst_j, bumped = 0.0, None, []
        for j in range(1, T):
            t2 = tgt_in.clone()
            t2[0, j] = (t2[0, j] + 1) % 10
            bumped.append((j, t2))
            change = float((run(t2)[0, :j] - base[0, :j]).abs().max())
            if change > future:
                future, worst_j = change, j
        if not bound("causal-leak-train").ok(future):
            model.eval()                       # a leak in eval mode too is causal-leak's to measure and locate
            ev_base = ctx.forward(model, src, tgt_in)[0]
            eval_leak = max(float((ctx.forward(model, src, t2)[0][0, :j] - ev_base[0, :j]).abs().max())
                            for j, t2 in bumped)
            model.train()
            if not bound("causal-leak").ok(eval_leak):
                return [check("causal-leak-train", "skip", None, _expected(),
                              f"later tokens leak in eval mode too ({num(rnd(eval_leak, 6))}): causal-leak measures "
                              f"and locates that leak")]
    ok = bound("causal-leak-train").ok(future)
    data: dict = {"future": rnd(future, 6), "token": worst_j}
    line = None
    if not ok:
        ops = trace.record(ctx, lambda: ctx.forward(model, src, tgt_in), seed=seed)
        hits = masked_score_dropouts(ops)
        if hits:
            line = hits[0].line
            data["mechanism"] = {"kind": "dropout-on-masked-scores", "op": hits[0].name, "line": line,
                                 "text": f"{hits[0].name} at line {line} is applied to scores that are already "
                                         f"masked: it zeroes some masked entries, which the softmax then weighs "
                                         f"like real keys"}
    detail = (f"train mode, the same dropout masks: changing decoder token {worst_j} moves an earlier output by "
              f"{num(rnd(future, 6))}" if not ok else
              f"largest change of an earlier output in train mode when a later decoder token changes: "
              f"{num(rnd(future, 6))}")
    return [check("causal-leak-train", "pass" if ok else "fail", rnd(future, 6), _expected(), detail, data=data,
                  location=ctx.where(line))]


def _expected() -> str:
    return f"{bound('causal-leak-train')}: in training too, an output never depends on later input tokens"
