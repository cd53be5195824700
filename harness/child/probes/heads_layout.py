"""Where the heads' values land: every reshape of the student's attention, replayed on position indices.

The mechanism of heads-split-wrong is a reshape that moves values to another token: x.view(B, h, T, d_k) on
x of shape (B, T, D) (instead of view(B, T, h, d_k).transpose(1, 2)), or (B, h, T, d_k) glued back into
(B, T, D) without moving h next to d_k. A failed permutation check is only its symptom: a random forward pass
or attention computed some other wrong way fails it too.

Measured on the op record of one forward pass: each view / reshape / flatten / unflatten / view_as /
reshape_as the student's code ran on a tensor with exactly one axis of the probe's token count T is made again
on a tensor of the same shape that holds, at every element, its token index along that axis. A reshape that
keeps tokens apart returns a tensor whose entries along its own (single) T axis are 0..T-1 again; one that
mixes them returns other indices there. Reshapes whose output has no single T axis (tokens flattened into the
batch) are not judged. The probes choose a T that no other axis has.
"""
from __future__ import annotations

import torch

from ..recorder import Recorder
from . import randomness, trace

# The calls that reshape a tensor, by the Tensor method that replays them (args[0] is the tensor either way).
RESHAPES = {torch.Tensor.view: "view", torch.Tensor.reshape: "reshape", torch.reshape: "reshape",
            torch.Tensor.flatten: "flatten", torch.flatten: "flatten", torch.Tensor.unflatten: "unflatten",
            torch.unflatten: "unflatten", torch.Tensor.view_as: "view_as", torch.Tensor.reshape_as: "reshape_as"}


def recorder(path: str) -> Recorder:
    """The reshapes made from the student's file, with their arguments as given (a view of one forward pass:
    pass it as `also=` to trace.record)."""
    return Recorder(path, ops=RESHAPES, inputs="given", limit=4000)


def _axis(shape, size: int) -> int | None:
    axes = [i for i, s in enumerate(shape) if s == size]
    return axes[0] if len(axes) == 1 else None


def _replay(op, t: torch.Tensor, tokens: int) -> tuple[torch.Tensor, int] | None:
    """(the replayed token indices, the output's token axis), or None when the call cannot be judged."""
    a = _axis(t.shape, tokens)
    if a is None or t.dim() < 2:
        return None
    idx = torch.arange(tokens).view([-1 if i == a else 1 for i in range(t.dim())]).expand(tuple(t.shape))
    idx = idx.contiguous()
    args = list(op.args[1:])
    if op.name == "view" and (len(args) == 1 and isinstance(args[0], torch.dtype) or "dtype" in op.kwargs):
        return None                                    # x.view(dtype): a reinterpretation, not a reshape
    name = "reshape" if op.name == "view" else op.name   # view's values are reshape's wherever view succeeds
    try:
        out = getattr(idx, name)(*args, **op.kwargs)
    except (RuntimeError, TypeError, ValueError, IndexError):
        return None
    if not isinstance(out, torch.Tensor):
        return None
    b = _axis(out.shape, tokens)
    return (out, b) if b is not None else None


def positions(rec: Recorder, tokens: int) -> dict:
    """The mechanism: kind "positions-mixed" (the first reshape that moves a token's values to another token,
    its line, shapes and the share of values moved), "positions-kept" (every reshape judged keeps tokens apart)
    or "unobserved" (no reshape could be judged)."""
    judged = 0
    for op in rec.ops:
        t = op.args[0] if op.args else None
        if not isinstance(t, torch.Tensor):
            continue
        got = _replay(op, t, tokens)
        if got is None:
            continue
        out, b = got
        judged += 1
        want = torch.arange(tokens).view([-1 if i == b else 1 for i in range(out.dim())])
        moved = float((out != want).double().mean())
        if moved > 0:
            shape_in, shape_out = list(t.shape), list(out.shape)
            return {"kind": "positions-mixed", "line": op.line, "op": op.name, "in_shape": shape_in,
                    "out_shape": shape_out, "moved": round(moved, 4), "judged": judged,
                    "text": f"the {op.name} at line {op.line} turns {tuple(shape_in)} into {tuple(shape_out)} and "
                            f"puts {moved:.0%} of the values at another token (replayed on token indices): the "
                            f"heads are cut from, or glued back over, several tokens"}
    if judged:
        return {"kind": "positions-kept", "judged": judged,
                "text": f"each of the {judged} reshapes of the forward pass keeps every token's values at that "
                        f"token (replayed on token indices): the heads are split and merged without mixing "
                        f"tokens, so the failure comes from another op"}
    return {"kind": "unobserved", "judged": 0,
            "text": "no reshape of a tensor with a token axis was seen, so where the heads' values land was not "
                    "measured"}


def permutation_mechanism(ctx, run_x, run_px, tokens: int, perm, random: bool) -> tuple[dict, int | None]:
    """Why attention is not permutation-equivariant, measured (heads-permutation, block-permutation): (the
    check's data, its line). data["mechanism"]: a random forward pass (kind "random", the random op located),
    else where the heads' values land (positions' kinds); data["divergence"]: the first op whose output is
    no longer the permuted one (where the symptom starts). The line: the mechanism's op, else the divergence's."""
    if random:
        first = randomness.first_random(ctx, run_x)
        drawn = randomness.mechanism(first)
        return {"mechanism": {"kind": "random", "draw": drawn["kind"], "op": drawn["op"], "line": drawn["line"],
                              "fused": bool(drawn.get("fused")),
                              "text": "two passes of the same input differ, so the permuted comparison measures "
                                      "the randomness, not the heads: " + drawn["text"]}}, drawn["line"]
    rec = recorder(ctx.source.code_path)
    ops = trace.record(ctx, run_x, also=(rec,))
    data = {"mechanism": positions(rec, tokens)}
    first = trace.first_divergence(ops, trace.record(ctx, run_px), trace.tokens_permuted(tokens, perm))
    div = trace.describe(ctx, first, "the output on permuted tokens is not the permuted output")
    if div:
        data["divergence"] = div
    return data, data["mechanism"].get("line") or (div or {}).get("line")
