"""Which op makes a forward pass random: two passes of the same input under different seeds, op by op.

A module in eval mode computes a function: the same input gives the same output. When two passes differ, the
first op (in execution order) whose output differs while every op before it agreed is the one that draws
random numbers; its name and arguments say whether it is a dropout left on (F.dropout(training=True), a fused
attention kernel given dropout_p > 0 regardless of self.training) or another draw (torch.randn in forward).
"""
from __future__ import annotations

import torch

from ..recorder import Op
from . import trace

# Ops whose output is random by design: the first divergence landing on one of them is the mechanism.
DROPOUT_OPS = frozenset({"dropout", "dropout_", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
                         "feature_alpha_dropout", "native_dropout", "feature_dropout"})
# Fused attention kernels that apply a dropout of their own when given dropout_p > 0 (and training=True).
FUSED_DROPOUT = frozenset({"scaled_dot_product_attention", "multi_head_attention_forward"})
RANDOM_OPS = frozenset({"rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm",
                        "bernoulli", "bernoulli_", "normal", "normal_", "uniform_", "multinomial", "exponential_",
                        "random_"})


def dropout_p(op: Op) -> float | None:
    """The dropout probability a fused attention call was given (recorded with its inputs), else None."""
    p = op.kwargs.get("dropout_p")
    return float(p) if isinstance(p, (int, float)) and not isinstance(p, bool) else None


def mechanism(first: Op | None) -> dict:
    """What the first op that differs between two passes of the same input is: kind "dropout" (a dropout op, or
    a fused attention kernel with dropout_p > 0), "random-op" (a draw), or "unknown" (not random by design)."""
    if first is None:
        return {"kind": "unknown", "op": None, "line": None, "text": "no op of the student's file differs"}
    base = {"op": first.name, "line": first.line}
    p = dropout_p(first) if first.name in FUSED_DROPOUT else None
    if first.name in DROPOUT_OPS:
        return {**base, "kind": "dropout",
                "text": f"{first.name} at line {first.line} is active after model.eval(): it draws a new mask on "
                        f"every call"}
    if p is not None and p > 0:
        return {**base, "kind": "dropout", "fused": True, "dropout_p": p,
                "text": f"{first.name} at line {first.line} is given dropout_p={p:g} after model.eval(): the "
                        f"fused kernel does not follow the module's mode and draws a new dropout mask on every "
                        f"call"}
    if first.name in RANDOM_OPS:
        return {**base, "kind": "random-op",
                "text": f"{first.name} at line {first.line} draws random numbers in the forward pass"}
    return {**base, "kind": "unknown", "text": "the first differing op is not random by design"}


def first_random(ctx, fn) -> Op | None:
    """The first op whose output differs between two runs of fn() under different seeds (fn is deterministic
    when None)."""
    return trace.first_divergence(trace.record(ctx, fn, seed=1), trace.record(ctx, fn, seed=2), trace.identical,
                                  tol=0.0)


def twice_differs(fn, out) -> bool:
    """fn() run again gives another output than `out` (a tensor, or a tuple whose first item is one)."""
    again = fn()
    a = out[0] if isinstance(out, (tuple, list)) else out
    b = again[0] if isinstance(again, (tuple, list)) else again
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.shape != b.shape:
        return False
    return trace._diff(a, b) != 0.0
