"""Padding: outputs at real positions must not depend on padding, and a fully padded row must stay finite."""
from __future__ import annotations

import torch

from ..intercept import Recorder
from . import locate, mechanism, trace
from .base import check, rnd
from .common import PAD, batch, eval_model, ref_loss


def invariance(ctx):
    """A sequence alone vs the same sequence padded inside a longer batch.

    On failure: the first op whose output for the real part already differs, and how much weight the
    attention applied to V gives to PAD keys (all of it: the mask is inverted; some: no padding mask).
    """
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
    if err != err:
        fn = (lambda: ctx.forward(model, s1, t1)) if not torch.isfinite(alone).all() else \
            (lambda: ctx.forward(model, S, T))
        return [trace.not_finite(ctx, "padding-invariance", "< 1e-4", fn, "the logits")]
    ok = err < 1e-4
    data, line = {}, None
    if not ok:
        ops_a = trace.record(ctx, lambda: ctx.forward(model, s1, t1))
        ops_b = trace.record(ctx, lambda: ctx.forward(model, S, T))
        div = trace.describe(ctx, trace.first_divergence(ops_a, ops_b, trace.real_part_unchanged),
                             "the real positions change when padding is added")
        # (T_q, T_k, real queries, real keys): encoder self, cross, decoder self-attention of sample 0
        shapes = ((10, 10, 5, 5), (11, 10, 6, 5), (11, 11, 6, 6))
        pads = [m for m in (mechanism.pad_mass(ops_b, *s, 2) for s in shapes) if m]
        worst = max(pads, key=lambda m: m["pad"]) if pads else None
        mech = _pad_mechanism(worst)
        data = {"divergence": div, "mechanism": mech}
        if mech.get("kind") in ("inverted", "missing"):
            fns = locate.functions(ctx, "padding_mask")
            line = locate.last_return(fns[0]) if fns and mech["kind"] == "inverted" else mech.get("line")
        else:
            line = (div or {}).get("line")
    return [check("padding-invariance", "pass" if ok else "fail", rnd(err, 6), "< 1e-4",
                  "max change of the logits at real positions when the same sequence is padded to length 10",
                  data=data, location=ctx.where(line))]


def _pad_mechanism(worst: dict | None) -> dict:
    if worst is None:
        return {"kind": "unobserved", "text": "no attention weights multiplied with V were observable"}
    if worst["pad"] > 0.99:
        return {**worst, "kind": "inverted",
                "text": f"the attention at line {worst['line']} gives {worst['pad']:.0%} of the real queries' weight "
                        f"to PAD keys and {worst['real']:.0%} to real ones"}
    if worst["pad"] > 1e-3 and worst.get("masked_softmax_line"):
        return {**worst, "kind": "renormalised",
                "text": f"the softmax at line {worst['masked_softmax_line']} gives PAD keys weight 0, but the weights "
                        f"multiplied with V at line {worst['line']} give them {worst['pad']:.0%}: the weights that "
                        f"multiply V are not the softmax of the masked scores"}
    if worst["pad"] > 1e-3:
        return {**worst, "kind": "missing",
                "text": f"the attention at line {worst['line']} gives {worst['pad']:.0%} of the real queries' weight "
                        f"to PAD keys: the padding is not masked"}
    return {**worst, "kind": "elsewhere", "text": "every attention gives PAD keys weight 0, so the change comes "
                                                  "from another op"}


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
