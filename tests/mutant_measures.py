"""Measurements for tests/unit/test_mutants.py's later mutants (issue 48's property bugs), written without the
engine: each measures the property on a module (the reference or a mutant), the same way on both.

A module here is the loaded file (its MiniTransformer, train, ...); the models are tiny and seeded.
"""
from __future__ import annotations

import contextlib
import io

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook


def _tiny(mod, **overrides):
    torch.manual_seed(0)
    kwargs = dict(d_model=16, h=2, d_ff=32, num_layers=1, dropout=0.0)
    kwargs.update(overrides)
    return mod.MiniTransformer(**kwargs)


class _Stop(BaseException):
    pass


def params_outside_optimizer(mod) -> list:
    """Names of the trainable parameters of the model train() was given that no param group holds, read at the
    first optimizer step (the run stops there)."""
    model, seen = _tiny(mod), []

    def hook(opt, args, kwargs):
        held = {id(p) for g in opt.param_groups for p in g["params"]}
        seen.append([n for n, p in model.named_parameters() if p.requires_grad and id(p) not in held])
        raise _Stop
    handle = register_optimizer_step_pre_hook(hook)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            mod.train(model, steps=1, batch_size=4, log_every=10 ** 9)
    except _Stop:
        pass
    finally:
        handle.remove()
    return seen[0]


class _Sgd(torch.nn.Module):
    """A model with one parameter whose steps cost nothing: train() is about the schedule here."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(13))

    def forward(self, src, tgt):
        return self.w.expand(*tgt.shape, 13), []


def lr_per_step(mod, steps: int = 420) -> list:
    """The learning rate the module's own train() sets at each of its first `steps` optimizer steps."""
    seen = []
    handle = register_optimizer_step_pre_hook(lambda opt, a, k: seen.append(opt.param_groups[0]["lr"]))
    try:
        torch.manual_seed(0)
        with contextlib.redirect_stdout(io.StringIO()):
            mod.train(_Sgd(), steps=steps, batch_size=2, log_every=10 ** 9)
    finally:
        handle.remove()
    return seen


def rises(lrs: list) -> list:
    """Each step's rise of the lr as a share of the peak."""
    peak = max(lrs)
    return [(b - a) / peak for a, b in zip(lrs, lrs[1:])]


@torch.no_grad()
def silenced_layer_train_change(mod) -> float:
    """EncoderLayer(dropout 0.3) with every Linear zeroed, so its sublayers add nothing: the largest change of its
    output from eval mode to train mode (the skip path alone carries the input)."""
    torch.manual_seed(0)
    layer = mod.EncoderLayer(32, 2, 64, dropout=0.3)
    for m in layer.modules():
        if isinstance(m, torch.nn.Linear):
            m.weight.zero_()
            m.bias.zero_()
    x = torch.randn(2, 5, 32)
    e = layer.eval()(x)
    t = layer.train()(x)
    return (t - e).abs().max().item()


@torch.no_grad()
def train_mode_leak(mod) -> float:
    """In train mode (dropout 0.3), each pass seeded alike so the dropout masks agree: the largest change of the
    logits at positions before j when decoder token j changes."""
    torch.manual_seed(0)
    model = mod.MiniTransformer(d_model=32, h=2, d_ff=64, num_layers=1, dropout=0.3).train()
    src = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]])
    tgt = torch.tensor([[11, 6, 2, 9, 5, 1, 4, 1, 3]])

    def run(t):
        torch.manual_seed(1)
        return model(src, t)[0]
    base, worst = run(tgt), 0.0
    for j in range(1, tgt.size(1)):
        t2 = tgt.clone()
        t2[0, j] = (t2[0, j] + 1) % 10
        worst = max(worst, (run(t2)[0, :j] - base[0, :j]).abs().max().item())
    return worst
