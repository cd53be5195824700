"""Padding: outputs at real positions must not depend on padding, and a fully padded row must stay finite."""
from __future__ import annotations

import torch

from ..intercept import Recorder
from .base import check, rnd
from .common import PAD, batch, eval_model, ref_loss


def invariance(ctx):
    """A sequence alone vs the same sequence padded inside a longer batch."""
    model = eval_model(ctx)
    src, tgt = batch(ctx, 2, 5, 5, seed_offset=4)
    long_src, long_tgt = batch(ctx, 1, 10, 10, seed_offset=5)
    s1, t1 = src[:1], tgt[:1, :-1]                                   # (1, 5), (1, 6)
    S = torch.full((2, 10), PAD, dtype=torch.long, device=ctx.device)
    T = torch.full((2, 11), PAD, dtype=torch.long, device=ctx.device)
    S[0, :5], T[0, :6] = s1[0], t1[0]
    S[1], T[1] = long_src[0], long_tgt[0, :-1]
    with torch.no_grad():
        alone, _ = ctx.forward(model, s1, t1)
        padded, _ = ctx.forward(model, S, T)
    err = float((alone[0] - padded[0, :6]).abs().max())
    ok = err < 1e-4
    line = None
    if not ok:
        from . import locate
        fns = locate.functions(ctx, "padding_mask")
        line = locate.last_return(fns[0]) if fns else None
    return [check("padding-invariance", "pass" if ok else "fail", rnd(err, 6), "< 1e-4",
                  "max change of the logits at real positions when the same sequence is padded to length 10",
                  location=ctx.where(line))]


def padded_row(ctx):
    """One source row entirely PAD: outputs and gradients must stay finite (-1e9, not -inf)."""
    model = eval_model(ctx)
    model.train()
    src, tgt = batch(ctx, 2, 6, 6, seed_offset=6)
    src[1] = PAD
    rec = Recorder(ctx.source.code_path)
    with rec:
        logits, _ = ctx.forward(model, src, tgt[:, :-1])
        loss = ref_loss(logits, tgt[:, 1:])
    with ctx.student("loss.backward()"):
        loss.backward()
    finite_out = bool(torch.isfinite(logits).all())
    nonfinite_grads = [n for n, p in model.named_parameters() if p.grad is not None and not torch.isfinite(p.grad).all()]
    inf_fill = [c for c in rec.of("masked_fill")
                if len(c.args) > 2 and isinstance(c.args[2], float) and c.args[2] == float("-inf")
                or c.kwargs.get("value") == float("-inf")]
    line = inf_fill[0].line if inf_fill else None
    ok = finite_out and not nonfinite_grads
    nan_frac = float((~torch.isfinite(logits)).float().mean())
    return [check("padded-row-finite", "pass" if ok else "fail",
                  {"nonfinite_logits": rnd(nan_frac, 3), "nonfinite_grads": len(nonfinite_grads)},
                  "finite logits and gradients",
                  "batch of 2 whose second source row is all PAD" +
                  (f"; masking with -inf at line {line}" if line else ""),
                  data={"inf_mask_line": line}, location=ctx.where(line if not ok else None))]
