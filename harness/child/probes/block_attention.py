"""Block probes of the attention weights: rows sum to 1 over the keys, scores scaled by sqrt(d_head)."""
from __future__ import annotations

import torch

from ...checks import BY_ID, bound
from ..intercept import attention_weights, softmax_dim
from .base import check, rnd
from .block import heads, inputs, make_block, record, run_block, weight_lists

# Matmul-like calls that can make the (..., T, T) scores, beyond intercept.WATCHED's "matmul".
SCORE_MATMULS = {torch.Tensor.__rmatmul__: "matmul", torch.baddbmm: "matmul"}


# ---------------------------------------------------------------------------
# block-rows-sum: the softmax runs over the keys
# ---------------------------------------------------------------------------

ROWS_TOL = 1e-4   # correct code: <= 3.6e-7 (float32 rounding); the dim=-2 mutant: 1.6-3.4


def rows_sum(ctx):
    """Every attention row sums to 1 over the keys (the last axis), causal off."""
    T, d = 8, 16
    block = make_block(ctx, d, 2, 32)
    x = inputs(ctx, T, d, offset=1)
    _, rec = record(ctx, lambda: run_block(ctx, block, x))
    weights = attention_weights(rec)
    if not weights:
        return [check("block-rows-sum", "skip", None, "rows sum to 1 over keys",
                      "no softmax or scaled_dot_product_attention call was observed in TransformerBlock.forward")]
    ctx.artifacts.setdefault("block_weights", {})["plain"] = weight_lists(weights[0])
    worst = max(float(torch.nan_to_num((w.sum(-1) - 1).abs(), nan=float("inf")).max()) for w in weights)
    dims = [softmax_dim(c) for c in rec.of("softmax")]
    bad = [c for c in rec.of("softmax") if softmax_dim(c) not in (None, -1)]
    ok = worst < ROWS_TOL
    return [check("block-rows-sum", "pass" if ok else "fail", rnd(worst, 6), f"|row sum - 1| < {ROWS_TOL:g}",
                  f"{len(weights)} attention tensor(s) observed in TransformerBlock({d}, 2, 32) on a ({T}, {d}) "
                  f"input; softmax over dim {softmax_dim(bad[0]) if bad else -1}",
                  data={"softmax_dims": sorted({v for v in dims if v is not None})},
                  location=ctx.where(bad[0].line if bad and not ok else None))]


# ---------------------------------------------------------------------------
# block-saturation: scores divided by sqrt(d_head)
# ---------------------------------------------------------------------------

# TransformerBlock(64, 2, 128) (d_head = 32) on a (16, 64) standard-normal input, at init; the statistic is the
# mean over heads and rows of the largest weight of a row (1/16 = 0.0625 would be uniform).
# Measured, seeds 0-9: reference, lesson code (both forms), pre-norm sdpa and separate-qkv fixtures 0.100-0.117;
# missing-sqrt-dk mutant 0.403-0.492. Other shapes measured the same way (correct max / mutant min): d_model=8, h=2,
# 5 tokens 0.33 / 0.29 (overlap: d_head=4 is too small for the scaling to matter); (64, 4) 0.113 / 0.282;
# (64, 2) on 8 tokens 0.224 / 0.483; (64, 1) 0.119 / 0.489. (64, 2) on 16 tokens keeps n_heads >= 2 and separates
# by 3.4x. Threshold at the geometric mean, a margin of ~1.9x on either side.
SAT_SHAPE = (64, 2, 128, 16)
SAT_MAX = bound("block-saturation").hi    # declared in checks.py


def saturation(ctx):
    """Mean largest weight per row at init: near uniform when scaled, near one-hot when not."""
    from .block_causal import assumes_flag_off
    assumes_flag_off(ctx)
    d, h, d_ff, T = SAT_SHAPE
    block = make_block(ctx, d, h, d_ff)
    x = inputs(ctx, T, d, offset=2)
    _, rec = record(ctx, lambda: run_block(ctx, block, x), keep_outputs=("softmax", "sdpa", "matmul"),
                    also=SCORE_MATMULS)
    weights = attention_weights(rec)
    if not weights:
        return [check("block-saturation", "skip", None, "", "no attention weights observed")]
    w = heads(weights[0]).float()
    value = float(torch.nan_to_num(w, nan=0.0).max(-1).values.mean())
    ok = value < SAT_MAX
    # where the scores are computed (q @ k^T: a matmul-like call whose result is (..., T, T)), else the softmax
    scores = [c.line for c in rec.of("matmul") if isinstance(c.out, torch.Tensor) and c.out.dim() >= 2
              and tuple(c.out.shape[-2:]) == (T, T)]
    line = scores[0] if scores else next((c.line for c in rec.of("softmax") if c.line), None)
    return [check("block-saturation", "pass" if ok else "fail", rnd(value, 3),
                  f"{bound('block-saturation')} (correct code: {BY_ID['block-saturation'].correct}; uniform: {1 / T:.3f})",
                  f"mean over heads and rows of the largest attention weight, TransformerBlock({d}, {h}, {d_ff}) "
                  f"at init on {T} standard-normal tokens (d_head = {d // h})",
                  data={"per_head": [rnd(v, 3) for v in w.max(-1).values.mean(-1).tolist()],
                        "d_head": d // h, "tokens": T}, location=ctx.where(line if not ok else None))]
