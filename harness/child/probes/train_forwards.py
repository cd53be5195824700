"""The forward passes of the model given to train(), however train() runs it.

Module call hooks see `model(...)` only: a loop that calls `model.forward(...)` directly, or the class's
`Model.forward(model, ...)`, runs the model without them. The tap wraps `forward` on the model's class for
the duration of train() (put back after, as it was): `model(...)` reaches it through Module.__call__,
`model.forward(...)` and `type(model).forward(model, ...)` directly, `torch.func.functional_call(model, ...)`
through the call; each pass of the given instance is counted once, a copy's (deepcopy) or another instance's
not at all. On the class, not the instance: a model pickled whole (torch.save(model)) or deep-copied in train()
carries nothing of the tap.
"""
from __future__ import annotations

import functools

from .base import check


class ForwardTap:
    """on_call(args) before and on_out(out) after each forward pass of `model` (its class's forward wrapped)."""

    def __init__(self, model, on_call, on_out):
        self.model, self.on_call, self.on_out = model, on_call, on_out
        self.cls = type(model)
        self.own = "forward" in vars(self.cls)          # defined on the class itself (else inherited)
        self.original = self.cls.forward
        self.inner = 0          # passes of the model running now: a forward that calls itself counts once

    def on(self) -> None:
        original, model = self.original, self.model

        @functools.wraps(original)
        def forward(this, *args, **kwargs):
            if this is not model or self.inner:
                return original(this, *args, **kwargs)
            self.on_call(args)
            self.inner += 1
            try:
                out = original(this, *args, **kwargs)
            finally:
                self.inner -= 1
            return self.on_out(out)
        forward._mtxdiag_tap = True
        self.cls.forward = forward

    def off(self) -> None:
        """Put the class's forward back, unless the student's code replaced ours since (then theirs stays)."""
        if getattr(vars(self.cls).get("forward"), "_mtxdiag_tap", False):
            if self.own:
                self.cls.forward = self.original
            else:
                delattr(self.cls, "forward")

    def intact(self) -> bool:
        """Ours is still the forward the class and the instance resolve (train() did not replace either)."""
        return getattr(vars(self.cls).get("forward"), "_mtxdiag_tap", False) and \
            "forward" not in vars(self.model)


def runs_model_check(ctx, mech, steps):
    """train-runs-model: the forward passes of the given model counted by the tap, or a skip that says
    why they could not be: train() replaced the forward the count wraps, or the model's parameters got
    gradients while no pass was counted (it was run some other way)."""
    ran = mech.get("forwards", 0)
    expected = "> 0: train(model) runs the model it is given forward"
    if not ran and not mech.get("counted", True):
        return check("train-runs-model", "skip", None, expected, "could not count the forward passes: train() "
                     "replaced the model's forward method, which the count wraps")
    if not ran and mech.get("grads_seen"):
        return check("train-runs-model", "skip", None, expected, "could not count the forward passes: the model's "
                     "parameters got gradients, but no call of its forward was seen (it was run some other way)")
    return check("train-runs-model", "pass" if ran else "fail", ran, expected,
                 f"forward passes of the model given to train() over {steps} optimizer steps" +
                 ("" if ran else "; the loss comes from another model (a global?)"),
                 location=ctx.where(mech.get("other_forward_line")) if not ran else None)
