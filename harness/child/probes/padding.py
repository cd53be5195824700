"""Padding: outputs at real positions must not depend on padding, and a fully padded row must stay finite."""
from __future__ import annotations

import torch

from ...checks import bound
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
        return [trace.not_finite(ctx, "padding-invariance", str(bound("padding-invariance")), fn, "the logits")]
    ok = bound("padding-invariance").ok(err)
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
            line = locate.last_return(fns[0]) if fns and mech["kind"] == "inverted" else mech["fill_line"] \
                if mech.get("misaligned") else _call_without_mask(ctx, mech.get("stack") or []) or mech.get("line")
        else:
            line = (div or {}).get("line")
    return [check("padding-invariance", "pass" if ok else "fail", rnd(err, 6), str(bound("padding-invariance")),
                  "max change of the logits at real positions when the same sequence is padded to length 10",
                  data=data, location=ctx.where(line))]


def _call_without_mask(ctx, stack: list) -> int | None:
    """Walking out from the attention, the first call that passes no mask: where the mask was dropped."""
    import ast
    for line in stack[1:]:
        call = locate.call_at(ctx, line)
        if call is not None and not any("mask" in ast.unparse(a).lower() for a in list(call.args) +
                                        [k.value for k in call.keywords]):
            return line
    return None


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
    if worst["pad"] > 1e-3 and 0 < worst.get("heads_masked", 0) < worst.get("heads", 0) and worst.get("fill_line"):
        return {**worst, "kind": "missing", "misaligned": True,
                "text": f"the mask applied at line {worst['fill_line']} keeps PAD keys out of {worst['heads_masked']} "
                        f"of sample 0's {worst['heads']} heads but not the others ({worst['pad']:.0%} of the real "
                        f"queries' weight on PAD on average): the mask's rows are not laid out in the scores' "
                        f"(sample, head) order"}
    if worst["pad"] > 1e-3:
        return {**worst, "kind": "missing",
                "text": f"the attention at line {worst['line']} gives {worst['pad']:.0%} of the real queries' weight "
                        f"to PAD keys: the padding is not masked"}
    return {**worst, "kind": "elsewhere", "text": "every attention gives PAD keys weight 0, so the change comes "
                                                  "from another op"}


def padded_row(ctx):
    """One source row entirely PAD: outputs and gradients must stay finite (-1e9, not -inf).

    The lesson's advice; what is measured beyond it: whether an ordinary padded batch already gives NaN
    (`realistic`), where the first NaN appears, and whether it is a softmax over a row of scores that are
    all -inf (the mechanism)."""
    model = eval_model(ctx)
    model.train()
    src, tgt = batch(ctx, 2, 6, 6, seed_offset=6)
    src[1] = PAD
    logits, nonfinite_grads = _forward_backward(ctx, model, src, tgt)
    ok = bool(torch.isfinite(logits).all()) and not nonfinite_grads
    nan_frac = float((~torch.isfinite(logits)).float().mean())
    data, line = {}, None
    if not ok:
        ops = trace.record(ctx, lambda: ctx.forward(model, src, tgt[:, :-1]))
        first = trace.first_nan(ops)
        inf_rows = _fully_masked_row(first)
        line = (_inf_literal_line(ctx) if inf_rows else None) or (first.line if first else None)
        r_src, r_tgt = batch(ctx, 8, 3, 10, seed_offset=16)          # an ordinary padded batch
        r_logits, r_bad = _forward_backward(ctx, model, r_src, r_tgt)
        data = {"realistic": not bool(torch.isfinite(r_logits).all()) or bool(r_bad),
                "divergence": trace.describe(ctx, first, "NaN"),
                "mechanism": {"kind": "inf-row" if inf_rows else "other", "line": line,
                              "text": (f"the first NaN comes from {first.name} at line {first.line} over a row of "
                                       f"scores that are all -inf" if inf_rows else
                                       f"the first NaN comes from {first.name} at line {first.line}")
                              if first else "no op of the forward pass gave NaN: the gradients did"}}
    return [check("padded-row-finite", "pass" if ok else "fail",
                  {"nonfinite_logits": rnd(nan_frac, 3), "nonfinite_grads": len(nonfinite_grads)},
                  "finite logits and gradients", "batch of 2 whose second source row is all PAD",
                  data=data, location=ctx.where(line) if line else None)]


def _fully_masked_row(op) -> bool:
    """Is this op a softmax (or a fused attention) over a row whose keys are all masked?"""
    if op is None:
        return False
    if op.name == "softmax":
        return bool(op.ins) and bool((op.ins[0] == float("-inf")).all(-1).any())
    if op.name not in ("multi_head_attention_forward", "scaled_dot_product_attention"):
        return False
    for key in ("attn_mask", "key_padding_mask"):
        m = op.kwargs.get(key)
        if not isinstance(m, torch.Tensor) or m.dim() == 0:
            continue
        if m.dtype == torch.bool:   # MHA: True = blocked; SDPA: True = may attend
            blocked = m if op.name == "multi_head_attention_forward" else ~m
        else:
            blocked = m == float("-inf")
        if bool(blocked.all(-1).any()):
            return True
    return False


def _forward_backward(ctx, model, src, tgt):
    model.zero_grad(set_to_none=True)
    logits, _ = ctx.forward(model, src, tgt[:, :-1])
    loss = ref_loss(logits, tgt[:, 1:])
    with ctx.student("loss.backward()"):
        loss.backward()
    bad = [n for n, p in model.named_parameters() if p.grad is not None and not torch.isfinite(p.grad).all()]
    return logits.detach(), bad


def _inf_literal_line(ctx) -> int | None:
    """The first line of code (not a string or comment) that writes -inf: float("-inf"), -math.inf, ..."""
    import ast
    for node in ast.walk(ast.parse(ctx.source.text)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float" and \
                node.args and isinstance(node.args[0], ast.Constant) and "inf" in str(node.args[0].value).lower():
            return node.lineno
        if isinstance(node, ast.Attribute) and node.attr == "inf":
            return node.lineno
    return None
