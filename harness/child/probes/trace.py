"""First divergence: record every torch op the student's code runs, find the first one that breaks a property.

A behavioural check (no leak from later tokens, one sample independent of another, eval deterministic,
padding ignored, no NaN) says *that* the model is wrong. Re-running it with every op recorded says
*where*: the first op, in execution order, whose output already violates the property is the line to
look at, for bugs in the catalogue and for bugs nobody catalogued. Two runs are aligned op by op (same
code, same control flow); the property is judged on each op's output by a small function that knows
which slice must not change.

Style-independence: no attribute names and no layouts are assumed. The probes choose sizes that are
unique (e.g. 7 decoder positions, 11 source positions, 3 samples), so the axis that carries positions or
samples is found by its size, whatever order the student keeps axes in.
"""
from __future__ import annotations

import contextlib

import torch

from ..recorder import READS, Op, Recorder
from .base import manual_seed

# Ops that read, copy or move tensors without computing anything worth blaming.
QUIET = READS | {"detach", "clone", "contiguous", "to", "cpu", "cuda", "float", "double", "__setitem__"}
# Ops whose tensor inputs are kept too: attention is read from what multiplies V and what masks it.
KEEP_INPUTS = {"matmul", "__matmul__", "bmm", "einsum", "masked_fill", "masked_fill_", "where", "mul", "__mul__",
               "mul_", "softmax", "scaled_dot_product_attention", "multi_head_attention_forward", "add", "__add__",
               "__radd__", "sub", "__sub__", "__rsub__"}     # add, sub: where a position bias joins the scores


def recorder(path: str, limit: int = 6000) -> Recorder:
    """Every torch call made from the student's file with an output that holds data (innermost student frame =
    its line, six of its frames), copies of its outputs, and copies of its inputs for the KEEP_INPUTS ops."""
    return Recorder(path, quiet=QUIET, depth=6, limit=limit, outputs="copies", inputs="copies", keep_in=KEEP_INPUTS)


def record(ctx, fn, seed: int = 1234, also: tuple = (), raises: bool = False) -> list[Op]:
    """Run fn() under a recorder() with a fixed RNG state, so random ops agree between two runs.

    also: other recorders that watch the same run (one forward pass, several views of it); raises: an
    exception of fn() goes on to the caller (else the ops recorded up to the failure are the evidence)."""
    rng = torch.random.get_rng_state()
    manual_seed(seed)
    tr = recorder(ctx.source.code_path)
    try:
        with torch.no_grad(), tr, contextlib.ExitStack() as views:
            for rec in also:
                views.enter_context(rec)
            fn()
    except Exception:
        if raises:
            raise
    finally:
        torch.random.set_rng_state(rng)
    return tr.ops


# -- properties: (a, b) -> size of the violation (0 = holds), or None when it cannot be judged -------------
def _diff(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.shape != b.shape:
        return float("inf")
    if a.dtype == torch.bool or not a.is_floating_point():
        return float((a != b).any())
    a, b = a.double(), b.double()
    same = (a == b) | (torch.isnan(a) & torch.isnan(b))
    d = torch.where(same, torch.zeros_like(a), (a - b).abs())
    d = torch.nan_to_num(d, nan=1.0, posinf=1.0)
    scale = float(torch.nan_to_num(a.abs(), nan=0.0, posinf=0.0).max()) if a.numel() else 0.0
    return float(d.max()) / max(scale, 1.0) if d.numel() else 0.0


TOL = 1e-6   # relative: float32 noise of a recomputation is ~1e-7; a real dependence is >= 1e-4 here


def prefix_unchanged(size: int, j: int):
    """Causal: along every axis of length `size` (positions), the first j entries must not change."""
    def prop(a, b):
        axes = [i for i, s in enumerate(a.shape) if s == size]
        if not axes or a.shape != b.shape:
            return None
        sl = [slice(None)] * a.dim()
        for ax in axes[-2:]:            # a (T, T) pair tensor: the earlier-by-earlier block
            sl[ax] = slice(0, j)
        return _diff(a[tuple(sl)], b[tuple(sl)])
    return prop


def sample_unchanged(size: int, keep: int = 0):
    """Batch independence: along the axis of length `size` (samples), sample `keep` must not change."""
    def prop(a, b):
        axes = [i for i, s in enumerate(a.shape) if s == size]
        if len(axes) != 1 or a.shape != b.shape:
            return None
        return _diff(a.select(axes[0], keep), b.select(axes[0], keep))
    return prop


def sample_moved(size: int, i: int, j: int):
    """Batch order: sample i of run a must equal sample j of run b (the batch reordered)."""
    def prop(a, b):
        axes = [k for k, s in enumerate(a.shape) if s == size]
        if len(axes) != 1 or a.shape != b.shape:
            return None
        return _diff(a.select(axes[0], i), b.select(axes[0], j))
    return prop


def tokens_permuted(size: int, perm: torch.Tensor):
    """Permutation equivariance (no positions): b, from the permuted tokens, must be a with every axis of
    length `size` (positions; scores have two) permuted the same way."""
    def prop(a, b):
        axes = [i for i, s in enumerate(a.shape) if s == size]
        if not axes or a.shape != b.shape:
            return None
        p = perm.to(a.device)
        for ax in axes:
            a = a.index_select(ax, p)
        return _diff(a, b)
    return prop


def identical(a, b):
    """Determinism: the whole output must be the same."""
    return _diff(a, b) if a.shape == b.shape else None


def real_part_unchanged(a, b):
    """Padding: `a` from the sequence alone, `b` from it padded in a larger batch; b cut to a's shape must equal a."""
    if a.dim() != b.dim() or any(x > y for x, y in zip(a.shape, b.shape)):
        return None
    return _diff(a, b[tuple(slice(0, s) for s in a.shape)])


def first_divergence(ops_a: list, ops_b: list, prop, tol: float = TOL) -> Op | None:
    """The first op of run b whose output breaks `prop` against the same op of run a."""
    for oa, ob in zip(ops_a, ops_b):
        if oa.name != ob.name or oa.line != ob.line:
            return ob               # control flow itself differs from here on
        for ta, tb in zip(oa.outs, ob.outs):
            v = prop(ta, tb)
            if v is not None and v > tol:
                ob.violation = v
                return ob
    return None


def first_nan(ops: list) -> Op | None:
    """The first op whose output holds a NaN (an -inf in masked scores is legitimate; its NaN is not)."""
    for op in ops:
        if op.name in ("empty", "empty_like", "empty_strided", "new_empty"):
            continue                # uninitialised memory, overwritten before use: not where a NaN comes from
        if any(t.is_floating_point() and bool(torch.isnan(t).any()) for t in op.outs):
            return op
    return None


def describe(ctx, op: Op | None, what: str) -> dict | None:
    """The JSON evidence for a divergence: where, which op, the code on that line."""
    if op is None:
        return None
    lines = ctx.source.text.splitlines()
    code = lines[op.line - 1].strip() if 0 < op.line <= len(lines) else ""
    v = op.violation
    return {"line": op.line, "op": op.name, "code": code[:160], "index": op.index,
            "violation": None if v is None or v != v or v == float("inf") else round(float(v), 6),
            "text": f"{what} from line {op.line} on: `{code[:120]}` ({op.name}, op #{op.index + 1} of the forward "
                    f"pass) is the first output that already {'breaks' if v is not None else 'shows'} it"}


def not_finite(ctx, check_id: str, expected: str, fn, what: str) -> dict:
    """The check for a property that could not be measured because the logits are NaN/inf: where the NaN starts."""
    from .base import check
    nan = describe(ctx, first_nan(record(ctx, fn)), "NaN")
    return check(check_id, "error", None, expected, f"could not measure: {what} are not finite" +
                 (f"; {nan['text']}" if nan else ""), data={"could_not_measure": f"non-finite logits ({what})",
                                                            "divergence": nan},
                 location=ctx.where(nan["line"]) if nan else None)
