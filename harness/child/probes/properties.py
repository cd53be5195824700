"""Properties every correct model has, whatever its style: eval is deterministic, samples are independent.

Each check that fails is re-run with every op recorded, and the first op whose output breaks the
property is reported (file, line, code): the line and an honest explanation even for bugs nobody
catalogued.
"""
from __future__ import annotations

import torch

from ...checks import bound
from . import locate, randomness, trace
from .base import Skip, check, manual_seed, rnd
from .common import EOS, PAD, batch, eval_model, kwargs_for


def determinism(ctx):
    """Two eval-mode forward passes of the same batch give the same logits (model at its default dropout)."""
    model = ctx.model()                                 # default dropout: eval() must switch it off
    model.eval()
    src, tgt = batch(ctx, 3, 6, 8, seed_offset=40)
    tgt_in = tgt[:, :-1]
    with torch.no_grad():
        a, _ = ctx.forward(model, src, tgt_in)
        b, _ = ctx.forward(model, src, tgt_in)
    err = float(trace._diff(a, b))
    ok = err == 0.0
    data, line = {}, None
    if not ok:     # the first op that differs between two passes is the random one: what it is, where
        first = randomness.first_random(ctx, lambda: ctx.forward(model, src, tgt_in))
        div = trace.describe(ctx, first, "two eval-mode forward passes of the same batch differ")
        data = {"divergence": div, "mechanism": randomness.mechanism(first)}
        line = first.line if first is not None else None
    return [check("eval-determinism", "pass" if ok else "fail", rnd(err, 6), "0: identical logits",
                  "relative difference between two eval-mode forward passes of the same batch (default dropout)",
                  data=data, location=ctx.where(line))]


def batch_independence(ctx):
    """One sample's logits do not depend on the other samples of the batch (eval mode)."""
    model = eval_model(ctx)
    src, tgt = batch(ctx, 3, 7, 7, seed_offset=41)     # 3 samples of one length: no padding, axis of size 3
    other_src, other_tgt = batch(ctx, 3, 7, 7, seed_offset=42)
    src2, tgt2 = src.clone(), tgt.clone()
    src2[1:], tgt2[1:] = other_src[1:], other_tgt[1:]   # sample 0 identical, samples 1 and 2 replaced
    run = (lambda s, t: lambda: ctx.forward(model, s, t[:, :-1]))
    with torch.no_grad():
        manual_seed(5)
        a, _ = run(src, tgt)()
        manual_seed(5)
        b, _ = run(src2, tgt2)()
    if a.dim() == 0 or a.size(0) != 3:
        raise Skip("the logits do not have the batch first")
    with torch.no_grad():                              # the same samples in another order: sample 0 last
        manual_seed(5)
        c, _ = run(src.flip(0), tgt.flip(0))()
    err = float(trace._diff(a[0], b[0]))
    moved = float(trace._diff(a[0], c[2])) if c.shape == a.shape else 0.0
    if err != err:
        return [trace.not_finite(ctx, "batch-independence", str(bound("batch-independence")), run(src, tgt),
                                 "the logits")]
    ok = bound("batch-independence").ok(err) and bound("batch-independence").ok(moved)
    data, line = {"others_replaced": rnd(err, 6), "order_reversed": rnd(moved, 6)}, None
    if not ok:
        ops_a = trace.record(ctx, run(src, tgt))
        if not bound("batch-independence").ok(err):
            ops_b = trace.record(ctx, run(src2, tgt2))
            first = trace.first_divergence(ops_a, ops_b, trace.sample_unchanged(3))
            what = "sample 0 changes when the other samples of its batch change"
        else:                                          # compare sample 0 with itself placed last
            ops_b = trace.record(ctx, run(src.flip(0), tgt.flip(0)))
            first = trace.first_divergence(ops_a, ops_b, trace.sample_moved(3, 0, 2))
            what = "sample 0 changes when it is placed last in its batch"
        div = trace.describe(ctx, first, what)
        data["divergence"], line = div, (div or {}).get("line")
    return [check("batch-independence", "pass" if ok else "fail", rnd(max(err, moved), 6), str(bound("batch-independence")),
                  "relative change of sample 0's logits when the other samples of its batch are replaced, or when "
                  "the batch order is reversed", data=data, location=ctx.where(line))]


def decode_determinism(ctx):
    """greedy_decode gives the same tokens twice for the same source (it must not sample)."""
    decode = ctx.need("greedy_decode")
    model = eval_model(ctx)
    src, _ = batch(ctx, 3, 5, 7, seed_offset=43)
    outs, states = [], [_kept_state(model)]
    for seed in (1, 2):
        manual_seed(seed)
        with torch.no_grad(), ctx.student("greedy_decode(model, src)"):
            ys = decode(model, src, **kwargs_for(decode, max_len=12))
        outs.append(ys[0] if isinstance(ys, (tuple, list)) else ys)
        states.append(_kept_state(model))
    if not all(isinstance(y, torch.Tensor) for y in outs):
        raise Skip("greedy_decode does not return a tensor of tokens first")
    same = outs[0].shape == outs[1].shape and bool(torch.equal(outs[0], outs[1]))
    data, line = {}, None
    if not same:     # the mechanism where it is one: the call left state on the model that the next call reads
        kept = sorted(k for k in states[1] if states[1][k] != states[0].get(k))
        if kept:
            line = next((ln for ln in (locate.attribute_assignment(ctx, k.rsplit(".", 1)[-1]) for k in kept) if ln),
                        None)
            data["mechanism"] = {"kind": "state-kept", "attributes": kept[:5],
                                 "text": f"the first call left {', '.join(kept[:3])} on the model (set or grown "
                                         f"by greedy_decode), and the second call starts from it"}
    return [check("decode-determinism", "pass" if same else "fail", same, "True: the same tokens twice",
                  "greedy_decode twice on the same source with different random seeds", data=data,
                  location=ctx.where(line))]


def _kept_state(model) -> dict:
    """What a call could leave on the model besides its weights: every plain attribute of every submodule
    (not parameters, buffers, submodules or the train flag), summarised by shape and content sizes."""
    out = {}
    for path, mod in model.named_modules():
        for k, v in vars(mod).items():
            if not (k.startswith("_") or k == "training"):
                out[f"{path}.{k}" if path else k] = _summary(v)
    return out


def _summary(v, depth: int = 3):
    """A value's shape, two levels into containers (a cache is a list of dicts of growing tensors)."""
    if isinstance(v, torch.Tensor):
        return ("tensor", tuple(v.shape))
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    if depth and isinstance(v, (list, tuple)):
        return tuple(_summary(x, depth - 1) for x in v[:16]) + ((len(v),) if len(v) > 16 else ())
    if depth and isinstance(v, dict):
        return tuple((str(k), _summary(x, depth - 1)) for k, x in list(v.items())[:16]) + (len(v),)
    return type(v).__name__


ROWS_SUM = 1e-3    # |row sum - 1| of attention weights: float noise ~1e-7; unnormalised exponentials: ~1


def decode_consistency(ctx):
    """Inside greedy_decode, each step's decoder self-attention is causal for the current prefix length, and
    the tokens are those the model's own forward pass picks for each prefix, up to each row's first EOS (a
    loop may fill a finished row with PAD or EOS while the others go on).

    A decode loop that builds its masks once (for the first, one-token prefix) and reuses them lets every
    later step's prefix positions see their future. Sources of 12 tokens, decoding at most 10: a (t, t)
    weight tensor inside greedy_decode is the decoder self-attention, never the cross-attention.
    """
    decode = ctx.need("greedy_decode")
    model = eval_model(ctx)
    src, _ = batch(ctx, 3, 12, 12, seed_offset=44)
    run = (lambda: decode(model, src, **kwargs_for(decode, max_len=10)))
    with torch.no_grad(), ctx.student("greedy_decode(model, src)"):
        ys = run()
    ys = ys[0] if isinstance(ys, (tuple, list)) else ys
    if not isinstance(ys, torch.Tensor) or ys.dim() != 2 or ys.size(0) != 3 or ys.size(1) < 2:
        raise Skip("greedy_decode does not return (B, T) tokens first")
    # Tokens against the forward pass on 8 more sources: a cached decode step that gets, e.g., the wrong
    # position changes some rows' tokens only (about half at init), so 3 rows alone can all agree by chance.
    src8, _ = batch(ctx, 8, 12, 12, seed_offset=45)
    with torch.no_grad(), ctx.student("greedy_decode(model, src)"):
        ys8 = decode(model, src8, **kwargs_for(decode, max_len=10))
    ys8 = ys8[0] if isinstance(ys8, (tuple, list)) else ys8
    differs = None
    for s_, y_ in ((src, ys), (src8, ys8)):
        if not isinstance(y_, torch.Tensor) or y_.dim() != 2 or y_.size(0) != s_.size(0):
            continue
        ref = y_[:, :1].clone()                                # SOS, as the student's loop starts
        with torch.no_grad():
            for _ in range(y_.size(1) - 1):
                logits, _ = ctx.forward(model, s_, ref)
                ref = torch.cat([ref, logits[:, -1].argmax(-1, keepdim=True)], 1)   # (B, t + 1)
        # after a row's first EOS its tokens are the loop's filler (PAD, EOS), not predictions: not compared;
        # nor after a PAD the model predicted (untrained, it may): the forward pass's padding mask hides that key
        # from later queries, and a loop that builds only the causal mask for its prefix rightly does not
        stop = (y_ == EOS) | (y_ == PAD)
        after_eos = stop.long().cumsum(1) - stop.long() > 0                     # (B, T)
        agree = (y_ == ref) | after_eos
        d = next((t for t in range(y_.size(1)) if not bool(agree[:, t].all())), None)
        differs = d if differs is None else (differs if d is None else min(differs, d))
    from . import mechanism
    ops = trace.record(ctx, run)
    # a (t, t) product whose rows do not sum to 1 is not attention weights over the prefix (a block of an
    # online softmax's unnormalised exponentials over t source keys, say): it says nothing about the mask
    leaks = [(t, m) for t, m in ((t, mechanism.causal_mechanism(ops, t)) for t in range(2, ys.size(1) + 1))
             if m.get("kind") in ("missing", "inverted", "renormalised") and m.get("row_sum_err", 1.0) < ROWS_SUM]
    future = max((m.get("future_mass", 0.0) for _, m in leaks), default=0.0)
    ok = differs is None and not leaks
    data, line = {"first_token_differs": differs, "future_mass": rnd(future, 4)}, None
    if differs is not None and not leaks:        # where greedy_decode picks its token: argmax / max / topk
        pick = next((op for op in ops if op.name in ("argmax", "max", "topk", "multinomial")), None)
        if pick is not None:
            line = pick.line
            code = trace.describe(ctx, pick, "")["code"]
            data["divergence"] = {"line": pick.line, "op": pick.name, "code": code,
                                  "text": f"from step {differs} greedy_decode's token is not the argmax of the model's "
                                          f"forward pass at the last position of the prefix; it picks its token at "
                                          f"line {pick.line}: `{code}`"}
    if leaks:
        t, m = leaks[0]
        data["mechanism"] = {"kind": "mask-not-for-prefix", "line": m.get("line"), "prefix": t,
                             "text": f"inside greedy_decode, the decoder self-attention over a prefix of {t} tokens "
                                     f"gives later keys {m.get('future_mass', 0):.0%} of the weight: the mask used "
                                     f"there is not built for the current prefix length"}
        line = _mask_line_in(ctx, "greedy_decode") or m.get("line")
    return [check("decode-consistency", "pass" if ok else "fail", rnd(future, 4),
                  "0: no weight on later keys inside greedy_decode, and the forward pass's tokens",
                  "largest weight on later keys of the decoder self-attention inside greedy_decode" +
                  (f"; its token differs from the forward pass's from step {differs}" if differs is not None else ""),
                  data=data, location=ctx.where(line))]


def _mask_line_in(ctx, fn_name: str) -> int | None:
    """The line in fn_name that builds a mask, before its loop, from a variable the loop grows (the prefix)."""
    import ast
    from . import locate
    for fn in locate.functions(ctx, fn_name):
        loops = [n for n in ast.walk(fn) if isinstance(n, (ast.For, ast.While))]
        if not loops:
            continue
        start = min(n.lineno for n in loops)
        grown = {t.id for lp in loops for n in ast.walk(lp) if isinstance(n, ast.Assign)
                 for t in n.targets if isinstance(t, ast.Name)}
        for n in ast.walk(fn):
            name = getattr(n.func, "id", "") or getattr(n.func, "attr", "") if isinstance(n, ast.Call) else ""
            if "mask" in name.lower() and n.lineno < start and \
                    any(isinstance(a, ast.Name) and a.id in grown for a in n.args):
                return n.lineno
    return None
