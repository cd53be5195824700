"""Properties every correct model has, whatever its style: eval is deterministic, samples are independent.

Each check that fails is re-run with every op recorded, and the first op whose output breaks the
property is reported (file, line, code): the line and an honest explanation even for bugs nobody
catalogued.
"""
from __future__ import annotations

import torch

from . import trace
from .base import Skip, check, rnd
from .common import batch, eval_model, kwargs_for

# Ops whose output is random by design: the first divergence landing on one of them is the mechanism.
DROPOUT_OPS = {"dropout", "dropout_", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
               "native_dropout", "feature_dropout"}
RANDOM_OPS = {"rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm", "bernoulli",
              "bernoulli_", "normal", "normal_", "uniform_", "multinomial", "exponential_", "random_"}


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
    if not ok:
        ops_a = trace.record(ctx, lambda: ctx.forward(model, src, tgt_in), seed=1)
        ops_b = trace.record(ctx, lambda: ctx.forward(model, src, tgt_in), seed=2)
        first = trace.first_divergence(ops_a, ops_b, trace.identical, tol=0.0)
        div = trace.describe(ctx, first, "two eval-mode forward passes of the same batch differ")
        kind = "dropout" if first is not None and first.name in DROPOUT_OPS else \
            "random-op" if first is not None and first.name in RANDOM_OPS else "unknown"
        text = {"dropout": f"{first.name} at line {first.line} is active after model.eval(): it draws a new mask on "
                           "every call" if first is not None else "",
                "random-op": f"{first.name} at line {first.line} draws random numbers in the forward pass"
                if first is not None else "",
                "unknown": "the first differing op is not random by design"}[kind]
        data = {"divergence": div, "mechanism": {"kind": kind, "op": first.name if first else None,
                                                 "line": first.line if first else None, "text": text}}
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
        torch.manual_seed(5)
        a, _ = run(src, tgt)()
        torch.manual_seed(5)
        b, _ = run(src2, tgt2)()
    if a.dim() == 0 or a.size(0) != 3:
        raise Skip("the logits do not have the batch first")
    err = float(trace._diff(a[0], b[0]))
    if err != err:
        return [trace.not_finite(ctx, "batch-independence", "< 1e-5", run(src, tgt), "the logits")]
    ok = err < 1e-5
    data, line = {}, None
    if not ok:
        ops_a = trace.record(ctx, run(src, tgt))
        ops_b = trace.record(ctx, run(src2, tgt2))
        div = trace.describe(ctx, trace.first_divergence(ops_a, ops_b, trace.sample_unchanged(3)),
                             "sample 0 changes when the other samples of its batch change")
        data, line = {"divergence": div}, (div or {}).get("line")
    return [check("batch-independence", "pass" if ok else "fail", rnd(err, 6), "< 1e-5",
                  "relative change of sample 0's logits when the other two samples of its batch are replaced",
                  data=data, location=ctx.where(line))]


def decode_determinism(ctx):
    """greedy_decode gives the same tokens twice for the same source (it must not sample)."""
    decode = ctx.need("greedy_decode")
    model = eval_model(ctx)
    src, _ = batch(ctx, 3, 5, 7, seed_offset=43)
    outs = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        with torch.no_grad(), ctx.student("greedy_decode(model, src)"):
            ys = decode(model, src, **kwargs_for(decode, max_len=12))
        outs.append(ys[0] if isinstance(ys, (tuple, list)) else ys)
    if not all(isinstance(y, torch.Tensor) for y in outs):
        raise Skip("greedy_decode does not return a tensor of tokens first")
    same = outs[0].shape == outs[1].shape and bool(torch.equal(outs[0], outs[1]))
    return [check("decode-determinism", "pass" if same else "fail", same, "True: the same tokens twice",
                  "greedy_decode twice on the same source with different random seeds")]
