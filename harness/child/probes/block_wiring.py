"""Block probes of the wiring: heads split and merged without mixing positions, the residual connection."""
from __future__ import annotations

import ast

import torch
import torch.nn.functional as F

from . import heads_layout, randomness
from .base import Skip, check, rnd
from .block import (calls_to, forward_statements, inputs, make_block, make_mha, output_tensor, run_block,
                    zero_linears)


# ---------------------------------------------------------------------------
# block-permutation: heads split and merged without mixing positions
# ---------------------------------------------------------------------------

PERM_TOL = 1e-4   # correct code: <= 9.6e-7 (float32 rounding); heads-split-wrong mutants: 0.17-0.5


def permutation(ctx):
    """Without positions, attention (and the block, causal off) commutes with permuting the tokens.

    On failure, the mechanism is measured on the forward pass of the first that fails (heads_layout): two
    passes of the same input that differ (a random op), or a reshape that puts a token's values at another."""
    from .block_causal import assumes_flag_off
    assumes_flag_off(ctx)
    T, d, h = 7, 16, 2
    perm = torch.tensor([3, 0, 6, 5, 1, 4, 2])
    x = inputs(ctx, T, d, offset=4)
    errs, runs, random = {}, {}, {}      # per module: max error, its two runs, whether a pass is random
    with torch.no_grad():
        if ctx.has("MultiHeadAttention"):
            mha = make_mha(ctx, d, h)
            where = "MultiHeadAttention.forward(x)"
            runs["MultiHeadAttention"] = (lambda: mha(x), lambda: mha(x[perm]))
            with ctx.student(where):
                a = output_tensor(mha(x), where)
                b = output_tensor(mha(x[perm]), where)
                random["MultiHeadAttention"] = randomness.twice_differs(lambda: mha(x), a)
            errs["MultiHeadAttention"] = float(torch.nan_to_num((a[perm] - b).abs(), nan=float("inf")).max())
        block = make_block(ctx, d, h, 32)
        runs["TransformerBlock"] = (lambda: run_block(ctx, block, x), lambda: run_block(ctx, block, x[perm]))
        a = run_block(ctx, block, x)
        b = run_block(ctx, block, x[perm])
        random["TransformerBlock"] = randomness.twice_differs(lambda: run_block(ctx, block, x), a)
        errs["TransformerBlock"] = float(torch.nan_to_num((a[perm] - b).abs(), nan=float("inf")).max())
    worst = max(errs.values())
    ok = worst < PERM_TOL
    data, line = {k: rnd(v, 6) for k, v in errs.items()}, None
    if not ok:       # the first that fails, the attention alone before the block around it
        name = next(k for k in errs if errs[k] >= PERM_TOL)
        found, line = heads_layout.permutation_mechanism(ctx, *runs[name], T, perm, random[name])
        data.update(found, measured_on=name)
    return [check("block-permutation", "pass" if ok else "fail", rnd(worst, 6),
                  f"max |f(Px) - P f(x)| < {PERM_TOL:g}",
                  "attention on permuted tokens (no positional encoding, causal off) must give the permuted "
                  "output: " + ", ".join(f"{k} {v:.2g}" for k, v in errs.items()),
                  data=data, location=ctx.where(line if not ok else None))]


# ---------------------------------------------------------------------------
# block-residual
# ---------------------------------------------------------------------------

RESID_MIN = 1e-3   # correct code (post- and pre-norm): 3.1-4.6; missing residual mutant: exactly 0.0


def _residual_line(ctx, block) -> int | None:
    """The first line of forward that calls a sub-layer (attention, feed-forward) without adding anything."""
    sublayers = {n for n, m in block.named_children() if not isinstance(m, torch.nn.LayerNorm)}
    for s in sorted(forward_statements(ctx), key=lambda s: s.lineno):
        if isinstance(s, ast.AugAssign) and isinstance(s.op, ast.Add):
            continue
        if calls_to(s, sublayers) and not any(isinstance(b, ast.BinOp) and isinstance(b.op, ast.Add)
                                              for b in ast.walk(s)):
            return s.lineno
    return None


def residual(ctx):
    """With every nn.Linear zeroed, a block with residuals returns LayerNorm(x) (post-norm) or x (pre-norm)."""
    T, d = 6, 16
    block = make_block(ctx, d, 2, 32)
    with torch.no_grad():
        n_lin = zero_linears(block)
        if not n_lin:
            raise Skip("the block has no nn.Linear layers to zero")
        x1, x2 = inputs(ctx, T, d, offset=5), inputs(ctx, T, d, offset=6)
        o1, o2 = run_block(ctx, block, x1), run_block(ctx, block, x2)
    vary = float(torch.nan_to_num((o1 - o2).abs(), nan=0.0).max())
    ln = F.layer_norm(x1, (d,))
    if float((o1 - ln).abs().max()) < 1e-3:
        kind = "post-norm"
    elif float((o1 - x1).abs().max()) < 1e-3:
        kind = "pre-norm"
    elif vary < RESID_MIN:
        kind = "constant"
    else:
        kind = "other"
    ok = vary >= RESID_MIN
    return [check("block-residual", "pass" if ok else "fail", rnd(vary, 5),
                  f">= {RESID_MIN:g} (the input passes through the residual: LayerNorm(x) post-norm, x pre-norm)",
                  f"TransformerBlock({d}, 2, 32) with all {n_lin} nn.Linear weights and biases zeroed: largest "
                  f"change of the output between two inputs; output looks {kind}",
                  data={"kind": kind}, location=ctx.where(_residual_line(ctx, block) if not ok else None))]
