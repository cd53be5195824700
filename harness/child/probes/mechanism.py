"""Attention mechanisms read from a recorded forward pass: what actually multiplies V, and what masked it.

A symptom (a later token moves an earlier output; padding moves a real output) has many possible
mechanisms. Before a cause is named, the weights that really reach the values are inspected:
- the op that multiplies weights with V (matmul, bmm, einsum), or a fused kernel whose weights are
  recomputed from its arguments (scaled_dot_product_attention, multi_head_attention_forward);
- which keys those weights cover (later ones, earlier ones, PAD), whether they sum to 1 and over which axis;
- whether a mask was applied before the softmax, after it, or never.
Axes are identified by their length (the probes choose distinct lengths for queries, keys and samples).
"""
from __future__ import annotations

import math

import torch

from ..recorder import Op

MATMULS = ("matmul", "__matmul__", "bmm", "einsum")


def _fused_weights(op: Op) -> torch.Tensor | None:
    """Weights of a fused attention call, recomputed from what it was given (None when unobservable)."""
    if op.name == "multi_head_attention_forward":
        return op.outs[1] if len(op.outs) > 1 else None          # (B, T_q, T_k) when need_weights
    if op.name != "scaled_dot_product_attention" or len(op.ins) < 3:
        return None
    q, k = op.ins[0].double(), op.ins[1].double()
    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))             # (..., T_q, T_k)
    mask = op.kwargs.get("attn_mask", op.ins[3] if len(op.ins) > 3 else None)
    if op.kwargs.get("is_causal"):
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    if isinstance(mask, torch.Tensor):
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask.double()
    return torch.softmax(s, -1).nan_to_num(0.0)


def sdpa_scores(op: Op) -> torch.Tensor | None:
    """The scaled scores a scaled_dot_product_attention call computed (before its mask)."""
    if len(op.ins) < 2:
        return None
    q, k = op.ins[0].double(), op.ins[1].double()
    scale = op.kwargs.get("scale") or 1.0 / math.sqrt(q.size(-1))
    return (q @ k.transpose(-2, -1)) * scale


def applied_weights(ops: list, t_q: int, t_k: int) -> list[tuple[Op, torch.Tensor]]:
    """(op, weights as (..., T_q, T_k)) for every attention application with these query/key lengths."""
    out = []
    for op in ops:
        if op.name in MATMULS and op.ins and op.outs:
            y = op.outs[0]
            for w in op.ins[:2]:
                # weights @ V: (..., T_q, T_k) @ (..., T_k, d) -> (..., T_q, d), or an einsum into any layout
                if w.dim() >= 2 and tuple(w.shape[-2:]) == (t_q, t_k) and y.dim() >= 2 and t_q in y.shape[:-1] \
                        and w.is_floating_point() and float(w.min()) >= -1e-6 and y.size(-1) != t_k:
                    out.append((op, w.double()))
                    break
        elif op.name in ("scaled_dot_product_attention", "multi_head_attention_forward"):
            w = _fused_weights(op)
            if w is not None and tuple(w.shape[-2:]) == (t_q, t_k):
                out.append((op, w.double()))
    return out


def fused_mask_state(ops: list, t: int) -> list[dict]:
    """For fused calls without observable weights: did they get a causal mask? (True = future blocked.)"""
    out = []
    for op in ops:
        if op.name != "multi_head_attention_forward" or (len(op.outs) > 1):
            continue
        q = op.ins[0] if op.ins else None
        if q is None or t not in q.shape:
            continue
        mask, causal = op.kwargs.get("attn_mask"), bool(op.kwargs.get("is_causal"))
        blocked, inverted = None, False
        if isinstance(mask, torch.Tensor) and tuple(mask.shape[-2:]) == (t, t):
            m = mask.reshape(-1, t, t)[0]
            hidden = m if m.dtype == torch.bool else m < -1e4                  # (t, t) True: the key is blocked
            future = torch.ones(t, t, dtype=torch.bool).triu(1)
            past = torch.ones(t, t, dtype=torch.bool).tril(-1)
            blocked = bool(hidden[future].all())
            # later keys all open and earlier ones all blocked: the triangle is the wrong way round
            inverted = not bool(hidden[future].any()) and bool(hidden[past].all())
        out.append({"line": op.line, "causal": blocked if blocked is not None else (causal or None),
                    "inverted": inverted})
    return out


def masses(w: torch.Tensor) -> dict:
    """Row-mean weight on later keys, on earlier keys, and the worst |row sum - 1| (square weights)."""
    t = w.size(-1)
    w3 = w.reshape(-1, w.size(-2), t)
    fut = torch.ones(t, t, dtype=torch.bool).triu(1)
    far = torch.ones(t, t, dtype=torch.bool).triu(2)
    past = torch.ones(t, t, dtype=torch.bool).tril(-1)
    rows = w3.sum(-1)
    return {"future": float((w3 * fut).sum(-1)[:, :-1].mean()),           # last row has no later keys
            "far_future": float((w3 * far).sum(-1)[:, :-2].mean()) if t > 2 else 0.0,   # beyond the next key
            # first row has no earlier keys; the last row has no later ones (fully masked under an inverted mask)
            "past": float((w3 * past).sum(-1)[:, 1:-1].mean()) if t > 2 else float((w3 * past).sum(-1).mean()),
            "row_sum_err": float((rows - 1).abs().max())}


def _diagonal_masked(w: torch.Tensor) -> bool:
    """Rows 1.. put all their weight on strictly earlier keys (none on themselves, none later), so the only
    weight on later keys is row 0's, which had no key allowed: the mask blocks j >= i instead of j > i."""
    t = w.size(-1)
    if t < 3:
        return False
    w3 = w.double().reshape(-1, t, t)[:, 1:]                                 # (heads*batch, rows 1.., keys)
    strict_past = torch.ones(t, t, dtype=torch.bool).tril(-1)[1:]            # (rows 1.., keys)
    return bool(((w3 * strict_past).sum(-1) - 1).abs().max() < 1e-4)


def _rows_with_no_key(w: torch.Tensor) -> float | None:
    """Fraction of rows that are uniform over every key, when every row that gives later keys weight is one of
    them (rows fully masked, spread evenly); None otherwise. One such row alone is the diagonal-masked case."""
    t = w.size(-1)
    w3 = w.double().reshape(-1, t, t)[:, :-1]                               # the last row has no later keys
    uniform = ((w3 - 1.0 / t).abs() < 1e-5).all(-1)                         # (heads*batch, rows)
    later = (w3 * torch.ones(t, t, dtype=torch.bool).triu(1)[:-1]).sum(-1) > 1e-6
    if t < 3 or not bool(later.any()) or bool((later & ~uniform).any()) or float(uniform.double().mean()) < 0.5:
        return None
    return float(uniform.double().mean())


def _masked_after(ops: list, sm: Op) -> Op | None:
    """A masking op that takes this softmax's output as its input (the mask applied after the softmax)."""
    y = sm.outs[0]
    for op in ops[sm.index + 1: sm.index + 6]:
        if op.name in ("masked_fill", "masked_fill_", "where", "mul", "__mul__", "mul_") and any(
                a.shape == y.shape and torch.equal(a, y) for a in op.ins):
            return op
    return None


def producer(ops: list, after: int, before: int, w: torch.Tensor) -> Op | None:
    """The first op between two indices whose output already is `w` (where the applied weights were made)."""
    for op in ops[after + 1: before]:
        y = op.outs[0] if op.outs else None
        if y is not None and y.shape == w.shape and torch.allclose(y.double(), w, atol=1e-7):
            return op
    return None


def causal_mechanism(ops: list, t: int) -> dict:
    """Why outputs depend on later tokens, from the decoder self-attention (T x T) actually applied."""
    applied = applied_weights(ops, t, t)
    softmaxes = [op for op in ops if op.name == "softmax" and op.outs and op.outs[0].dim() >= 2
                 and tuple(op.outs[0].shape[-2:]) == (t, t)]
    sm_future = [masses(op.outs[0].double())["future"] for op in softmaxes]
    if not applied:
        fused = fused_mask_state(ops, t)
        # the calls given a (t, t) mask (the cross-attention's query is t long too, without one)
        if any(f["inverted"] for f in fused) and not any(f["causal"] for f in fused):
            f = next(f for f in fused if f["inverted"])
            return {"kind": "inverted", "line": f["line"], "observed": "fused attention", "future_mass": 1.0,
                    "past_mass": 0.0,
                    "text": f"the self-attention call at line {f['line']} gets an attn_mask that blocks every "
                            f"earlier key and no later one: the causal triangle is the wrong way round"}
        if fused and all(f["causal"] is False or f["causal"] is None for f in fused):
            return {"kind": "missing", "line": fused[0]["line"], "observed": "fused attention",
                    "text": f"the self-attention call at line {fused[0]['line']} gets no causal attn_mask "
                            f"(is_causal False)"}
        return {"kind": "unobserved", "text": "the decoder self-attention weights could not be observed"}
    m = [masses(w) for _, w in applied]
    worst = max(range(len(m)), key=lambda i: m[i]["future"])
    op, fut = applied[worst][0], m[worst]["future"]
    base = {"line": op.line, "future_mass": round(fut, 4), "past_mass": round(m[worst]["past"], 4),
            "row_sum_err": round(max(x["row_sum_err"] for x in m), 4), "observed": op.name}
    if fut > 1e-3:
        if _diagonal_masked(applied[worst][1]):
            return {**base, "kind": "diagonal-masked",
                    "text": f"the weights multiplied with V at line {op.line} give every position after the first "
                            f"only earlier keys, never itself; the first position has no key left, and its fully "
                            f"masked row spreads {fut * (t - 1):.0%} of its weight over later keys: the causal mask "
                            f"blocks the diagonal too"}
        empty = _rows_with_no_key(applied[worst][1])
        if empty is not None:
            return {**base, "kind": "no-key-allowed", "empty_rows": empty,
                    "text": f"{empty:.0%} of the rows of the weights multiplied with V at line {op.line} are uniform "
                            f"over every key, and only those give later keys weight: the mask used there allows "
                            f"no key at all in those rows (a softmax of equally masked scores is uniform), so the "
                            f"causal triangle is there but another mask combined with it blocks everything"}
        if m[worst]["far_future"] < 1e-6 and t > 2:
            return {**base, "kind": "off-by-one",
                    "text": f"the weights multiplied with V at line {op.line} give each position's next key "
                            f"{fut:.0%} of the row and keys further ahead none: the causal mask is shifted by one"}
        if m[worst]["past"] < 1e-6 and fut > 0.3:
            return {**base, "kind": "inverted",
                    "text": f"the weights multiplied with V at line {op.line} give {fut:.0%} of each row to later "
                            f"keys and none to earlier ones"}
        masked_sm = [op_ for op_, f in zip(softmaxes, sm_future) if f < 1e-6]
        if masked_sm:
            made = producer(ops, masked_sm[0].index, op.index, applied[worst][1])
            return {**base, "kind": "renormalised", "mask_line": masked_sm[0].line,
                    "line": made.line if made else op.line,
                    "text": f"the softmax at line {masked_sm[0].line} gives later keys weight 0, but the weights "
                            f"multiplied with V at line {op.line} give them {fut:.0%}: the weights that multiply V "
                            f"are not the softmax of the masked scores"}
        return {**base, "kind": "missing",
                "text": f"no causal masking reaches the decoder self-attention: the weights multiplied with V at "
                        f"line {op.line} give {fut:.0%} of each row to later keys"}
    after = [(sm, _masked_after(ops, sm)) for sm, f in zip(softmaxes, sm_future) if f > 1e-3]
    after = [(sm, a) for sm, a in after if a is not None]
    if after and base["row_sum_err"] > 1e-3:
        sm, a = after[0]
        return {**base, "kind": "after-softmax", "line": a.line, "softmax_line": sm.line,
                "text": f"the softmax at line {sm.line} normalises over all keys, later ones included; the mask is "
                        f"applied to its output at line {a.line}, so each row's weights still depend on later keys"}
    return {**base, "kind": "elsewhere",
            "text": "the decoder self-attention gives later keys weight 0, so the dependence on later tokens "
                    "comes from another op"}


def key_axis(ops: list, t_q: int, t_k: int) -> dict | None:
    """Cross-attention (T_q != T_k): do the applied weights sum to 1 over the keys, or over the queries?"""
    applied = applied_weights(ops, t_q, t_k)
    if not applied or t_q == t_k:
        return None
    keys = max(float((w.sum(-1) - 1).abs().max()) for _, w in applied)
    queries = max(float((w.sum(-2) - 1).abs().max()) for _, w in applied)
    bad = next((op for op, w in applied if float((w.sum(-1) - 1).abs().max()) > 1e-4), None)
    # another axis the weights are distributions over (the heads: nn.Softmax(dim=1) on (B, h, T_q, T_k))
    other, other_err = None, 1.0
    nd = min(w.dim() for _, w in applied)
    for a in range(-nd, -2):
        if all(w.size(a) > 1 for _, w in applied):
            err = max(float((w.sum(a) - 1).abs().max()) for _, w in applied)
            if err < other_err:
                other, other_err = a, err
    return {"over_keys_err": round(keys, 6), "over_queries_err": round(queries, 6), "n": len(applied),
            "over_other_axis": other, "over_other_err": round(other_err, 6), "line": bad.line if bad else None}


def _pad_share(w: torch.Tensor, t_q, t_k, n_real_q, n_real_k, batch) -> tuple[float, float, list] | None:
    """(mean PAD share, mean real share, PAD share per head) of sample 0's real queries."""
    if w.size(0) % batch:
        return None
    w0 = w.double().reshape(batch, -1, t_q, t_k)[0, :, :n_real_q]            # (heads, real queries, keys)
    per_head = w0[..., n_real_k:].sum(-1).mean(-1)                           # (heads,)
    return float(per_head.mean()), float(w0[..., :n_real_k].sum(-1).mean()), [float(v) for v in per_head]


def pad_mass(ops: list, t_q: int, t_k: int, n_real_q: int, n_real_k: int, batch: int) -> dict | None:
    """Sample 0 of a padded batch: weight its real queries give to PAD keys (keys >= n_real_k).

    `masked_softmax` says whether some softmax of that shape did give PAD keys weight 0 (so a mask exists
    and reached the scores, even if what multiplies V is something else)."""
    worst = None
    for op, w in applied_weights(ops, t_q, t_k):
        share = _pad_share(w, t_q, t_k, n_real_q, n_real_k, batch)
        if share and (worst is None or share[0] > worst["pad"]):
            worst = {"line": op.line, "pad": round(share[0], 4), "real": round(share[1], 4), "t_k": t_k, "t_q": t_q,
                     "stack": list(op.lines), "index": op.index, "heads": len(share[2]),
                     "heads_masked": sum(v < 1e-6 for v in share[2])}
    if worst is not None:
        sm = [op for op in ops if op.name == "softmax" and op.outs and op.outs[0].dim() >= 3
              and tuple(op.outs[0].shape[-2:]) == (t_q, t_k)]
        shares = [(op, _pad_share(op.outs[0], t_q, t_k, n_real_q, n_real_k, batch)) for op in sm]
        zero = [op.line for op, sh in shares if sh is not None and sh[0] < 1e-6]
        worst["masked_softmax_line"] = zero[0] if zero else None
        # the last fill of scores of this shape before the weights met V: where a mask was applied
        fills = [op for op in ops if op.name in ("masked_fill", "masked_fill_", "where") and op.outs
                 and op.outs[0].dim() >= 3 and tuple(op.outs[0].shape[-2:]) == (t_q, t_k)
                 and op.index < worst["index"]]
        worst["fill_line"] = fills[-1].line if fills else None
    return worst
