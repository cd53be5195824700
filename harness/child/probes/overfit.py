"""Overfit one batch: a correct model, trained with the harness's own Adam, memorises a fixed batch of 8.

A model that cannot has a wiring bug (the source ignored, no gradient path): the causes read the check's
pass or fail only.
"""
from __future__ import annotations

import math

from ...checks import bound, value
from .base import check, rnd
from .common import adam, batch, kwargs_for, ref_loss

# declared in checks.py with their calibration (the report's texts render the same values)
OVERFIT_PASS = bound("overfit").hi                          # memorised: the pass line
OVERFIT_MAX_STEPS = value("overfit", "max_steps")
OVERFIT_STEPS_CORRECT = str(value("overfit", "correct_steps"))


def overfit(ctx):
    """A correct model memorises one batch (dropout 0): loss under OVERFIT_PASS within OVERFIT_MAX_STEPS Adam steps.

    It stops at the first step under the pass line: the question is whether the model can memorise, and
    how many steps it needs is the measurement (correct code: OVERFIT_STEPS_CORRECT). Training on to a
    lower loss only cost time: the reference went on from step ~40 to ~70 (overfit is a third of a quick
    check); the same check statuses on the corpus and the mutants either way (160 files)."""
    cls = ctx.need("MiniTransformer")
    model = ctx.model(**kwargs_for(cls, dropout=0.0))
    model.train()
    src, tgt = batch(ctx, value("overfit", "batch"), seed_offset=20)
    # a model built in the model server (a split run): its gradient goes back there and torch's Adam steps there
    remote = getattr(type(model), "__mtxdiag_remote__", False)
    opt = None if remote else adam(model.parameters(), lr=value("overfit", "lr"))
    curve = []
    with ctx.student("overfit one batch", seconds=ctx.budget(30)):
        for step in range(1, OVERFIT_MAX_STEPS + 1):
            logits, _ = model(src, tgt[:, :-1])
            loss = ref_loss(logits, tgt[:, 1:])
            if remote:
                loss.backward()
                model.step(value("overfit", "lr"))      # then its gradients cleared there
            else:
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            curve.append(float(loss.detach()))
            if not math.isfinite(curve[-1]) or curve[-1] < OVERFIT_PASS:
                break
    final = curve[-1]
    ctx.artifacts["overfit"] = [rnd(v) for v in curve]
    ok = math.isfinite(final) and final < OVERFIT_PASS
    return [check("overfit", "pass" if ok else "fail", rnd(final, 4),
                  f"< {OVERFIT_PASS} within {OVERFIT_MAX_STEPS} steps (correct code: {OVERFIT_STEPS_CORRECT} steps)",
                  f"loss on one fixed batch of {len(src)} after {len(curve)} steps"
                  + ("" if ok else f" (never under {OVERFIT_PASS})"),
                  data={"steps": len(curve), "at_100": rnd(curve[min(99, len(curve) - 1)])})]
