"""Attention at initialisation: softmax axis, saturation, heads that mix positions, causal leakage.

Weights are observed however the student computes them: the tensors the
softmax (or scaled_dot_product_attention) produced during one forward pass.
"""
from __future__ import annotations

import torch

from ...checks import BY_ID, bound
from ..intercept import attention_weights, softmax_dim, watch
from . import heads_layout, locate, mechanism, randomness, trace
from .base import check, manual_seed, rnd
from .common import accepts, batch, eval_model, kwargs_for


def _watch(ctx):
    """The recorder of the student's WATCHED calls the attention probes read (softmax, sdpa, matmul, triu, tril)."""
    return watch(ctx.source.code_path, keep_outputs=("softmax", "sdpa", "matmul", "triu", "tril"))


def _record_forward(ctx, model, src, tgt_in):
    rec = _watch(ctx)
    with torch.no_grad(), rec:
        ctx.forward(model, src, tgt_in)
    return rec


def softmax_axis(ctx):
    """Attention weights must sum to 1 over the keys.

    The key axis is found by its length in the cross-attention (decoder queries and source keys have
    different lengths), so any layout is judged right; only when no cross-attention weights are observable
    does the check fall back to the last axis of each softmax (the usual layout, stated in the result).
    """
    model = eval_model(ctx)
    src, tgt = batch(ctx, 4, 6, 9, seed_offset=1)
    tgt_in = tgt[:, :-1]                                   # T_tgt = T_src + 1: the two lengths always differ
    rec = _watch(ctx)           # one forward pass, two views: the watched calls and every op (the key axis)
    ops = trace.record(ctx, lambda: ctx.forward(model, src, tgt_in), also=(rec,), raises=True)
    weights = attention_weights(rec)
    ka = mechanism.key_axis(ops, tgt_in.size(1), src.size(1))
    bad_calls = [c for c in rec.of("softmax") if softmax_dim(c) not in (None, -1)]
    dims = sorted({softmax_dim(c) for c in rec.of("softmax") if softmax_dim(c) is not None})
    if ka is not None:
        rows = bound("attn-rows-sum")
        worst, ok = ka["over_keys_err"], rows.ok(ka["over_keys_err"])
        over = "the queries" if rows.ok(ka["over_queries_err"]) else \
            f"axis {ka['over_other_axis']} (neither keys nor queries: the heads in (B, h, T_q, T_k))" \
            if rows.ok(ka.get("over_other_err", 1.0)) else "neither keys nor queries"
        sm = [c.line for c in rec.of("softmax") if c.line]
        line = (bad_calls[0].line if bad_calls else sm[0] if sm else ka["line"]) if not ok else None
        return [check("attn-rows-sum", "pass" if ok else "fail", rnd(worst, 6), f"|sum over keys - 1| {bound('attn-rows-sum')}",
                      f"{ka['n']} cross-attention weight tensors multiplied with V; keys found by their length "
                      f"({src.size(1)} source positions)" + ("" if ok else f"; the weights sum to 1 over {over}"),
                      data={"softmax_dims": dims, "key_axis": ka}, location=ctx.where(line))]
    if not weights:
        return [check("attn-rows-sum", "skip", None, "rows sum to 1 over keys",
                      "no attention weights were observed in forward() (softmax, scaled_dot_product_attention, "
                      "or nn.MultiheadAttention with need_weights)")]
    worst = max(float((w.sum(-1) - 1).abs().max()) for w in weights)
    line = bad_calls[0].line if bad_calls else None
    ok = bound("attn-rows-sum").ok(worst)
    return [check("attn-rows-sum", "pass" if ok else "fail", rnd(worst, 6), f"|row sum - 1| {bound('attn-rows-sum')}",
                  f"{len(weights)} attention tensors observed; softmax over dim "
                  f"{softmax_dim(bad_calls[0]) if bad_calls else -1} (key axis assumed last: no cross-attention "
                  f"weights observable)",
                  data={"softmax_dims": dims, "layout_assumed": True},
                  location=ctx.where(line))]


def saturation(ctx):
    """Mean of the largest weight per row, first attention layer, at init: ~0.5 scaled, >0.75 unscaled."""
    model = eval_model(ctx)
    src, tgt = batch(ctx, 16, 10, 10, seed_offset=2)  # no padding: every row is a real query
    rec = _record_forward(ctx, model, src, tgt[:, :-1])
    weights = attention_weights(rec)
    if not weights:
        return [check("attn-saturation", "skip", None, "", "no attention weights observed")]
    per_call = [float(w.max(-1).values.mean()) for w in weights]
    first = per_call[0]
    T = weights[0].size(-1)
    # the scores: the first matmul whose result is (..., T_q, T_k), computed before the first softmax
    scores = [c for c in rec.of("matmul") if c.line and isinstance(c.out, torch.Tensor) and c.out.dim() >= 3
              and c.out.size(-1) == T and c.out.size(-2) == weights[0].size(-2)]
    ctx.artifacts["attn_rowmax_init"] = [rnd(v, 3) for v in weights[0].max(-1).values.flatten()[:2000].tolist()]
    # The threshold and its calibration are declared (checks.py).
    decl = BY_ID["attn-saturation"]
    scale = _score_scale(ctx) or _model_score_scale(ctx)
    unscaled = scale is not None and scale["ratio"] > 2.0
    if unscaled and scale.get("line"):
        scores = [scale]                 # where the unscaled scores are made (the model-wide measurement's op)
    ok = decl.bound.ok(first) and not unscaled
    # saturated rows while the scores are measured scaled: the first attention's inputs are large (the d2l book's
    # N(0, 1) embeddings times sqrt(d_model)), a choice of initialisation the scale cannot be blamed for: told, not failed
    inputs = not ok and scale is not None and not unscaled
    status = "info" if inputs else "pass" if ok else "fail"
    return [check("attn-saturation", status, rnd(first, 3),
                  f"{decl.text} (correct implementations: {decl.correct}), and scores scaled by 1/sqrt(d_k)",
                  "mean over rows of the largest attention weight, first attention call, untrained model" +
                  (f"; score std grows x{scale['ratio']:.2f} from d_k=4 to d_k=64 (scaled: x1, unscaled: x4)"
                   if scale else "") +
                  ("; the scores are scaled, so the rows saturate because the first attention's inputs are large"
                   if inputs else ""),
                  data={"per_call": [rnd(v, 3) for v in per_call], "scale": scale,
                        "mechanism": {"kind": "unscaled", "text": f"the attention scores' spread grows "
                                      f"x{scale['ratio']:.2f} when d_k goes from 4 to 64 with the same "
                                      f"projections: they are not divided by sqrt(d_k)"} if unscaled else {}},
                  location=ctx.where(_line_of(scores[0]) if scores and status == "fail" else None))]


def _line_of(x):
    return x.get("line") if isinstance(x, dict) else x.line


def _model_score_scale(ctx):
    """_score_scale on the whole model, for attention written under another interface (the annotated
    transformer's MultiHeadedAttention(h, d_model), a head per module): MiniTransformer(h=16) and (h=1) with one
    seed, the first attention's scores on the same batch. Their spread grows x4 from d_k=4 to d_k=64 unscaled, x1
    scaled, whatever the layout. `line`: the product that made the scores (a matmul, bmm or einsum before that
    softmax: where the division belongs)."""
    cls = ctx.need("MiniTransformer")
    if not all(accepts(cls, k) for k in ("h", "d_model")):
        return None
    src, tgt = batch(ctx, 4, 9, 9, seed_offset=2)                    # no padding: every row is a real query
    spread, line = {}, None
    for h in (16, 1):
        try:
            model = ctx.model(seed=ctx.seed, **kwargs_for(cls, h=h, d_model=64, dropout=0.0)).eval()
            ops = trace.record(ctx, lambda: ctx.forward(model, src, tgt[:, :-1]))
        except Exception:
            return None
        first = None
        for op in ops:
            if op.name == "softmax" and op.ins and op.ins[0].dim() >= 3 and op.ins[0].size(-1) in (9, 10):
                first = (op, op.ins[0])
                break
            if op.name == "scaled_dot_product_attention":
                first = (op, mechanism.sdpa_scores(op))
                break
        if first is None or first[1] is None:
            return None
        t = first[1]
        t = t[torch.isfinite(t) & (t.abs() < 1e4)]
        if not t.numel():
            return None
        spread[h] = float(t.double().std())
        if h == 1:
            made = [op for op in ops[:first[0].index] if op.name in mechanism.MATMULS and op.outs
                    and tuple(op.outs[0].shape[-2:]) == tuple(first[1].shape[-2:])]
            line = made[-1].line if made else None
    ratio = spread[1] / max(spread[16], 1e-12)
    return {"ratio": round(ratio, 3), "std_dk4": round(spread[16], 5), "std_dk64": round(spread[1], 5),
            "measured_on": "MiniTransformer(h=16) vs (h=1)", "line": line}


def _with_masks(module, *tensors):
    """module(*tensors), with None for every further positional parameter its forward requires (a mask or the d2l
    book's valid_lens that has no default): the student's own interface, not the contract's, is called."""
    import inspect
    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        return module(*tensors)
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    missing = [p for p in positional[len(tensors):] if p.default is p.empty]
    return module(*tensors, *([None] * len(missing)))


def _score_scale(ctx):
    """How the scores' spread grows with d_k: MultiHeadAttention(64, 16) vs (64, 1), the same projections.

    The projections are (d_model x d_model) whatever the number of heads, so with one seed both modules
    hold the same weights; per head, q.k sums d_k products: its spread grows as sqrt(d_k) unless divided
    by sqrt(d_k). Ratio ~1 scaled, ~4 unscaled (sqrt(64 / 4)), whatever the initialisation. Measured:
    scaled 0.96-1.35 (1.35: W_q = W_k at init), unscaled 3.85-4.0; threshold 2.0, their geometric middle.
    """
    if not ctx.has("MultiHeadAttention"):
        return None
    MHA = ctx.module.MultiHeadAttention
    # queries and keys from independent inputs: q.k has mean 0 even when W_q and W_k start equal (copies of
    # one Linear, Annotated-Transformer style), so only its spread, sqrt(d_k)-proportional or not, is left
    g = torch.Generator().manual_seed(7)
    xq, xk = (torch.randn(2, 9, 64, generator=g).to(ctx.device) for _ in range(2))
    spread = {}
    for h in (16, 1):
        manual_seed(ctx.seed)
        try:
            with ctx.student(f"MultiHeadAttention(64, {h})"):
                mha = MHA(64, h, **kwargs_for(MHA, dropout=0.0)).to(ctx.device).eval()
            ops = trace.record(ctx, lambda: _with_masks(mha, xq, xk, xk))
        except Exception:
            return None                  # another interface: the saturation measurement stands alone
        s = [op.ins[0] for op in ops if op.name == "softmax" and op.ins and op.ins[0].shape[-2:] == (9, 9)]
        s += [mechanism.sdpa_scores(op) for op in ops if op.name == "scaled_dot_product_attention"]
        s = [t[torch.isfinite(t) & (t.abs() < 1e4)] for t in s if t is not None]
        if not s or not s[0].numel():
            return None
        spread[h] = float(s[0].double().std())
    ratio = spread[1] / max(spread[16], 1e-12)
    return {"ratio": round(ratio, 3), "std_dk4": round(spread[16], 5), "std_dk64": round(spread[1], 5)}





def head_permutation(ctx):
    """Self-attention without positions is permutation-equivariant; a wrong head split breaks it.

    On failure, the mechanism is measured on the forward pass: whether two passes of the same input differ (a
    random op: not a layout), else whether a reshape puts a token's values at another token (heads_layout)."""
    MHA = ctx.need("MultiHeadAttention")
    manual_seed(ctx.seed)
    with ctx.student("MultiHeadAttention(64, 4)"):
        mha = MHA(64, 4, **kwargs_for(MHA, dropout=0.0)).to(ctx.device).eval()
    x = torch.randn(2, 7, 64, device=ctx.device)
    perm = torch.randperm(7)
    with torch.no_grad(), ctx.student("MultiHeadAttention.forward(q, k, v)"):
        a = mha(x, x, x)
        b = mha(x[:, perm], x[:, perm], x[:, perm])
        random = randomness.twice_differs(lambda: mha(x, x, x), a)
    a = a[0] if isinstance(a, (tuple, list)) else a
    b = b[0] if isinstance(b, (tuple, list)) else b
    err = float((a[:, perm] - b).abs().max())
    ok = bound("heads-permutation").ok(err)
    data, line = {}, None
    if not ok:
        xp = x[:, perm]
        data, line = heads_layout.permutation_mechanism(ctx, lambda: mha(x, x, x), lambda: mha(xp, xp, xp), 7, perm,
                                                        random)
    return [check("heads-permutation", "pass" if ok else "fail", rnd(err, 6),
                  f"max |MHA(Px) - P MHA(x)| {bound('heads-permutation')}",
                  "self-attention on a permuted input must give the permuted output", data=data,
                  location=ctx.where(line if not ok else None))]


_LEAK_EXPECTED = f"0 ({bound('causal-leak')}): an output never depends on later input tokens"


def leakage(ctx):
    """The lesson's leakage test, for every position: which outputs move when one input token changes.

    On failure, the same comparison is re-run with every op recorded: the first op whose output already
    depends on the later token is the line; the decoder self-attention actually applied says the mechanism.
    """
    model = eval_model(ctx)
    src, tgt = batch(ctx, 1, 8, 8, seed_offset=3)
    tgt_in = tgt[:, :-1]                                   # (1, 9): 9 decoder positions, 8 source positions
    T = tgt_in.size(1)

    def bumped(j):
        t2 = tgt_in.clone()
        t2[0, j] = (t2[0, j] + 1) % 10
        return t2
    with torch.no_grad():
        base, _ = ctx.forward(model, src, tgt_in)
        dep = torch.zeros(T, T)                            # dep[i, j]: change at output i when input j changes
        for j in range(1, T):
            out, _ = ctx.forward(model, src, bumped(j))
            dep[:, j] = (out[0] - base[0]).abs().max(-1).values.cpu()
    if not torch.isfinite(dep).all() or not torch.isfinite(base).all():
        return [trace.not_finite(ctx, "causal-leak", _LEAK_EXPECTED,
                                 lambda: ctx.forward(model, src, tgt_in), "the logits of a batch of one sequence")]
    future = float(torch.triu(dep, 1).max())               # earlier outputs moved by a later token
    past = dep.tril(-1)[1:, 1:]
    n_past = int(torch.ones(T - 1, T - 1).tril(-1).sum())
    past_frac = float((past > 1e-6).sum()) / max(n_past, 1)  # later outputs that see earlier tokens
    ctx.artifacts["dependency"] = [[rnd(v, 4) for v in row] for row in dep.tolist()]
    ok = bound("causal-leak").ok(future)
    data = {"future": rnd(future, 5), "past_fraction": rnd(past_frac, 3)}
    line = None
    if not ok:
        j = int(torch.triu(dep, 1).max(0).values.argmax())  # the later token that moves earlier outputs most
        rec = _watch(ctx)       # the same forward pass's watched calls: where the mask's triangle is made
        ops_a = trace.record(ctx, lambda: ctx.forward(model, src, tgt_in), also=(rec,))
        ops_b = trace.record(ctx, lambda: ctx.forward(model, src, bumped(j)))
        div = trace.describe(ctx, trace.first_divergence(ops_a, ops_b, trace.prefix_unchanged(T, j)),
                             f"outputs before position {j} depend on the token at {j}")
        mech = mechanism.causal_mechanism(ops_a, T)
        data.update(divergence=div, mechanism=mech, key_axis=mechanism.key_axis(ops_a, T, src.size(1)))
        line = _leak_line(ctx, rec, tgt_in, mech, div)
    return [check("causal-leak", "pass" if ok else "fail", rnd(future, 5),
                  _LEAK_EXPECTED,
                  f"max change of earlier outputs when a later decoder input token changes; "
                  f"{past_frac:.0%} of (later output, earlier token) pairs are connected",
                  data=data, location=ctx.where(line))]


def _leak_line(ctx, rec, tgt_in, mech, div):
    """The line to edit: the mask's triangle or return for a mask bug, else where the leak first shows.
    rec: the watched calls of the forward pass on tgt_in."""
    if mech.get("kind") in ("missing", "inverted", "off-by-one", "diagonal-masked"):
        tri = [c for c in rec.of("triu") + rec.of("tril") if c.line]
        fns = locate.functions(ctx, "target_mask")
        if ctx.has("target_mask"):
            try:
                with torch.no_grad(), ctx.student("target_mask(tgt_in)"):
                    m = ctx.module.target_mask(tgt_in)
                ctx.artifacts["target_mask"] = m.reshape(-1, m.size(-2), m.size(-1))[0].int().tolist()
            except Exception:
                pass
        if tri and mech["kind"] in ("inverted", "off-by-one"):      # the triangle itself is the wrong one
            return tri[0].line
        if fns:                                      # missing: the mask function returns without the causal part
            return locate.last_return(fns[0])
        if tri:
            return tri[0].line
        return mech.get("line")
    if mech.get("kind") in ("after-softmax", "renormalised"):
        return mech.get("line")
    return (div or {}).get("line") or mech.get("line")
