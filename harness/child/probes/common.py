"""Trusted inputs for the reversal probes: the lesson's data, made by the reference.

Model probes feed the student's model with batches from the reference's
make_batch and score it with the reference loss, so that a bug in the
student's data or training loop cannot hide (or fake) a bug in the model.
"""
from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F

from reference_model import reversal as ref

from .base import manual_seed

PAD, SOS, EOS, VOCAB = ref.PAD, ref.SOS, ref.EOS, ref.VOCAB


def batch(ctx, n: int, min_len=4, max_len=10, seed_offset=0):
    g_state = torch.random.get_rng_state()
    manual_seed(ctx.seed * 1000 + seed_offset)
    src, tgt = ref.make_batch(n, min_len=min_len, max_len=max_len)
    torch.random.set_rng_state(g_state)
    return src.to(ctx.device), tgt.to(ctx.device)


def ref_loss(logits, tgt_out):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1), ignore_index=PAD)


def adam(params, lr: float) -> torch.optim.Optimizer:
    """Adam with the fused kernel (one op per step for all parameters: a small model's step is its per-op
    overhead; 1.5 ms of ~8 ms a step on the reference), else foreach (complex parameters, which fused refuses at
    its first step; or whatever it refuses when built)."""
    params = list(params)
    if all(isinstance(p, torch.Tensor) and p.is_floating_point() for p in params):   # fused: no complex
        try:
            return torch.optim.Adam(params, lr=lr, fused=True)
        except (RuntimeError, ValueError, TypeError):
            pass
    return torch.optim.Adam(params, lr=lr, foreach=True)


def accepts(fn, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def default(fn, name: str, fallback):
    try:
        p = inspect.signature(fn).parameters.get(name)
    except (TypeError, ValueError):
        return fallback
    return fallback if p is None or p.default is inspect._empty else p.default


def kwargs_for(fn, **wanted):
    return {k: v for k, v in wanted.items() if accepts(fn, k)}


def small_model(ctx, **extra):
    """A tiny MiniTransformer for cheap traces; the default one if the constructor refuses."""
    cls = ctx.need("MiniTransformer")
    kw = kwargs_for(cls, d_model=16, h=2, d_ff=32, num_layers=1, **extra)
    try:
        return ctx.model(**kw)
    except Exception:
        return ctx.model(**kwargs_for(cls, **extra))


def eval_model(ctx, seed=None):
    """A fresh model at the contract's defaults with dropout 0, in eval mode."""
    cls = ctx.need("MiniTransformer")
    m = ctx.model(seed=seed, **kwargs_for(cls, dropout=0.0))
    m.eval()
    return m
