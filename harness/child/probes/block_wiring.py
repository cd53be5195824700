"""Block probes of the wiring: heads split and merged without mixing positions, the residual connection."""
from __future__ import annotations

import ast

import torch
import torch.nn.functional as F

from . import trace
from .base import Skip, check, rnd
from .block import calls_to, forward_statements, inputs, make_block, make_mha, output_tensor, record, run_block


# ---------------------------------------------------------------------------
# block-permutation: heads split and merged without mixing positions
# ---------------------------------------------------------------------------

PERM_TOL = 1e-4   # correct code: <= 9.6e-7 (float32 rounding); heads-split-wrong mutants: 0.17-0.5


def _split_line(rec, T, h) -> int | None:
    """The reshape that cuts (T, d) into (h, T, d_head) or glues (h, T, d_head) back without a transpose."""
    for c in rec.of("view"):
        t = c.args[0] if c.args else None
        if not isinstance(t, torch.Tensor) or not c.line:
            continue
        shape = list(c.args[1:])
        if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
            shape = list(shape[0])
        if not shape and "shape" in c.kwargs:
            shape = list(c.kwargs["shape"])
        try:
            shape = [int(s) for s in shape]
        except (TypeError, ValueError):
            continue
        if t.dim() == 2 and len(shape) == 3 and shape[0] == h and shape[1] == T:
            return c.line
        if t.dim() == 3 and t.size(0) == h and t.size(1) == T and len(shape) == 2:
            return c.line
    return None


def _first_unpermuted(ctx, run_x, run_px, T, perm) -> int | None:
    """The line of the first op whose output on the permuted tokens is not its output on the tokens, permuted:
    where heads (or anything) mix positions, whatever the layout (the view patterns below are the fallback)."""
    first = trace.first_divergence(trace.record(ctx, run_x), trace.record(ctx, run_px), trace.tokens_permuted(T, perm))
    return first.line if first is not None else None


def permutation(ctx):
    """Without positions, attention (and the block, causal off) commutes with permuting the tokens."""
    from .block_causal import assumes_flag_off
    assumes_flag_off(ctx)
    T, d, h = 7, 16, 2
    perm = torch.tensor([3, 0, 6, 5, 1, 4, 2])
    x = inputs(ctx, T, d, offset=4)
    errs, line = {}, None
    with torch.no_grad():
        if ctx.has("MultiHeadAttention"):
            mha = make_mha(ctx, d, h)
            with ctx.student("MultiHeadAttention.forward(x)"):
                a = output_tensor(mha(x), "MultiHeadAttention.forward(x)")
                b = output_tensor(mha(x[perm]), "MultiHeadAttention.forward(x)")
            errs["MultiHeadAttention"] = float(torch.nan_to_num((a[perm] - b).abs(), nan=float("inf")).max())
            if errs["MultiHeadAttention"] >= PERM_TOL:
                line = _first_unpermuted(ctx, lambda: mha(x), lambda: mha(x[perm]), T, perm)
                if line is None:
                    _, rec = record(ctx, lambda: mha(x))
                    line = _split_line(rec, T, h)
        block = make_block(ctx, d, h, 32)
        a = run_block(ctx, block, x)
        b = run_block(ctx, block, x[perm])
        errs["TransformerBlock"] = float(torch.nan_to_num((a[perm] - b).abs(), nan=float("inf")).max())
        if line is None and errs["TransformerBlock"] >= PERM_TOL:
            line = _first_unpermuted(ctx, lambda: run_block(ctx, block, x), lambda: run_block(ctx, block, x[perm]),
                                     T, perm)
            if line is None:
                _, rec = record(ctx, lambda: run_block(ctx, block, x))
                line = _split_line(rec, T, h)
    worst = max(errs.values())
    ok = worst < PERM_TOL
    return [check("block-permutation", "pass" if ok else "fail", rnd(worst, 6),
                  f"max |f(Px) - P f(x)| < {PERM_TOL:g}",
                  "attention on permuted tokens (no positional encoding, causal off) must give the permuted "
                  "output: " + ", ".join(f"{k} {v:.2g}" for k, v in errs.items()),
                  data={k: rnd(v, 6) for k, v in errs.items()}, location=ctx.where(line if not ok else None))]


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
        n_lin = 0
        for mod in block.modules():
            if isinstance(mod, torch.nn.Linear):
                n_lin += 1
                mod.weight.zero_()
                if mod.bias is not None:
                    mod.bias.zero_()
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
