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
