"""The "block" assignment's probes, shared part: building and calling the student's self-attention and block.

The lesson's code is unbatched: MultiHeadAttention(d_model, n_heads) and
TransformerBlock(d_model, n_heads, d_ff) take x of shape (seq, d_model). The
exercise adds a boolean causal flag, which a submission may take in the
constructor (TransformerBlock(..., causal=True)) or in forward
(block(x, causal=True)); both are supported, the constructor form first.
Attention weights are observed however they are computed (the softmax's
output, or recomputed from a scaled_dot_product_attention call).

Every threshold of these probes was calibrated with the probes themselves on the
reference, submissions/block_lesson*.py and tests/fixtures/correct/block_*.py
over seeds 0-4, and on the block mutants; the measured ranges are written next
to each threshold.

The probes themselves: block_attention.py (rows sum, saturation), block_causal.py (the causal flag),
block_wiring.py (heads split and merged, residual), block_lm.py (a tiny language model learns a toy task);
pe-relative is in positional.py.
"""
from __future__ import annotations

import ast

import torch

from ..intercept import watch
from .base import StudentError, manual_seed, rnd
from .common import accepts, kwargs_for


# ---------------------------------------------------------------------------
# building and calling the student's block
# ---------------------------------------------------------------------------

def causal_form(ctx) -> str | None:
    """How the block takes its causal flag: "init" (constructor keyword), "forward", or None."""
    cls = ctx.need("TransformerBlock")
    if accepts(cls.__init__, "causal"):
        return "init"
    if accepts(cls.forward, "causal"):
        return "forward"
    return None


def make_block(ctx, d_model, n_heads, d_ff, causal=False, seed=None):
    """A fresh TransformerBlock in eval mode (dropout 0 if it takes one), seeded."""
    cls = ctx.need("TransformerBlock")
    kw = kwargs_for(cls, dropout=0.0)
    if causal:
        kw["causal"] = True
    manual_seed(ctx.seed if seed is None else seed)
    args = ", ".join([str(d_model), str(n_heads), str(d_ff)] + [f"{k}={v}" for k, v in kw.items()])
    with ctx.student(f"TransformerBlock({args})"):
        block = cls(d_model, n_heads, d_ff, **kw)
    return block.to(ctx.device).eval()


def make_mha(ctx, d_model, n_heads, seed=None):
    cls = ctx.need("MultiHeadAttention")
    kw = kwargs_for(cls, dropout=0.0)
    manual_seed(ctx.seed if seed is None else seed)
    with ctx.student(f"MultiHeadAttention({d_model}, {n_heads})"):
        mha = cls(d_model, n_heads, **kw)
    return mha.to(ctx.device).eval()


def zero_linears(block) -> int:
    """Every nn.Linear's weight and bias set to 0 (a block in the model server: assigned there); how many."""
    lins = {n for n, m in block.named_modules() if isinstance(m, torch.nn.Linear)}
    if getattr(type(block), "__mtxdiag_remote__", False):
        block.assign({k: torch.zeros_like(p) for k, p in block.named_parameters()
                      if k.rpartition(".")[0] in lins and k.rpartition(".")[2] in ("weight", "bias")})
        return len(lins)
    with torch.no_grad():
        for n, m in block.named_modules():
            if n in lins:
                m.weight.zero_()
                if m.bias is not None:
                    m.bias.zero_()
    return len(lins)


def output_tensor(out, where):
    out = out[0] if isinstance(out, (tuple, list)) and out else out
    if not isinstance(out, torch.Tensor):
        raise StudentError(TypeError(f"{where} returned {type(out).__name__}, expected a tensor"), None, where)
    return out


def run_block(ctx, block, x, causal_kw=False, where=None):
    """block(x), or block(x, causal=True) when the flag is a forward keyword."""
    where = where or ("TransformerBlock.forward(x, causal=True)" if causal_kw else "TransformerBlock.forward(x)")
    with ctx.student(where):
        out = block(x, causal=True) if causal_kw else block(x)
    return output_tensor(out, where)


def inputs(ctx, *shape, offset=0):
    g = torch.Generator().manual_seed(ctx.seed * 1000 + 500 + offset)
    return torch.randn(*shape, generator=g).to(ctx.device)


def record(ctx, fn, **watching):
    """(fn()'s value, the recorder of the student's WATCHED calls) without gradients; watching: watch()'s options."""
    rec = watch(ctx.source.code_path, **watching)
    with torch.no_grad(), rec:
        out = fn()
    return out, rec


def heads(w: torch.Tensor) -> torch.Tensor:
    """Weights as (heads, T, T): a single head gets a head axis, a batch axis is dropped."""
    while w.dim() > 3:
        w = w[0]
    return w.unsqueeze(0) if w.dim() == 2 else w


def weight_lists(w: torch.Tensor) -> list:
    return [[[rnd(v, 3) for v in row] for row in head] for head in heads(w).float().cpu().tolist()]


def forward_statements(ctx) -> list[ast.stmt]:
    """The statements of TransformerBlock.forward in the student's source (empty if not found)."""
    try:
        tree = ast.parse(ctx.source.text)
    except SyntaxError:
        return []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "TransformerBlock":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    return [s for s in ast.walk(item) if isinstance(s, (ast.Assign, ast.AugAssign, ast.Return,
                                                                      ast.AnnAssign, ast.Expr))]
    return []


def calls_to(stmt, names) -> bool:
    for sub in ast.walk(stmt):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in names \
                and isinstance(sub.func.value, ast.Name) and sub.func.value.id == "self":
            return True
    return False
