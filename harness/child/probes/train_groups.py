"""Which trainable parameters of the student's own model no optimizer param group holds.

The trace of train() (training.py) runs on a stand-in model with three parameters, which any selection by
name or shape may happen to cover in full (an embedding, a Linear's weight and bias) while the real model's
LayerNorm weights or embeddings fall outside every group. Here the student's train() is run on a small real
MiniTransformer up to its first optimizer step, where the step pre-hook reads the param groups; the run is
stopped there (train() with no `steps` argument would otherwise run its default thousands of steps).
"""
from __future__ import annotations

import ast

from torch.optim.optimizer import register_optimizer_step_pre_hook

from . import locate
from .base import StudentError, manual_seed
from .common import kwargs_for, small_model


class _Stop(BaseException):
    """Raised from the first optimizer step: what was wanted is measured. BaseException: a train() that
    catches Exception does not swallow it."""


def coverage(ctx) -> dict | None:
    """{"missing": names of trainable parameters in no param group, "trainable": how many there are}, read at
    the first optimizer step of train() on a small real model; None when train() never stepped or failed."""
    fn = ctx.need("train")
    manual_seed(ctx.seed)
    try:
        model = small_model(ctx, dropout=0.0)
    except StudentError:
        return None
    seen: dict = {}

    def on_step(opt, args, kwargs):
        if not seen:
            held = {id(p) for g in opt.param_groups for p in g["params"]}
            seen["missing"] = [n for n, p in model.named_parameters() if p.requires_grad and id(p) not in held]
            seen["trainable"] = sum(1 for p in model.parameters() if p.requires_grad)
        raise _Stop()
    hook = register_optimizer_step_pre_hook(on_step)
    try:
        with ctx.student("train(model, steps=1)", seconds=ctx.budget(30)):
            fn(model, **kwargs_for(fn, steps=1, batch_size=4, device=ctx.device, log_every=10 ** 9))
    except StudentError as e:
        if not isinstance(e.exc, _Stop):
            return seen or None
    except _Stop:
        pass
    finally:
        hook.remove()
    return seen or None


def selection_line(ctx) -> int | None:
    """Where the param groups are chosen by name (the first `named_parameters` in train(), else anywhere in
    the file): the statement that leaves the parameters out; None when train() does not choose by name."""
    for fn in locate.functions(ctx, "train"):
        lines = locate.lines_mentioning(fn, "named_parameters")
        if lines:
            return lines[0]
    tree = ast.parse(ctx.source.text)
    lines = locate.lines_mentioning(tree, "named_parameters")
    return lines[0] if lines else None
