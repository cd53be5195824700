"""The student's TransformerLM as their adapter builds and calls it: the module and the call it made.

run_transformer_lm builds the student's model, loads the weights it is given and calls it. How it calls it is
the student's: the input alone, or with token positions, a RoPE module, a mask, keyword arguments. The brief
training (train_brief.py) and the parameters check (parameters.py) need that model to call again on other
inputs, so they record the call: every module whose forward runs in the student's files is recorded at its
first call with the arguments bound to its parameters (the input and every other argument, as the forward
received them), and the model is the outermost such module whose recorded call, made again with the input,
reproduces the adapter's output. It is then called the same way with only the input replaced.
"""
from __future__ import annotations

import inspect
import sys

import torch

from ... import lm_loader
from ..base import ProbeTimeout

CO_VARARGS, CO_VARKEYWORDS = 0x04, 0x08


class Call:
    """One module's forward as the adapter called it: `module(*args, **kwargs)`, the input at `at` (a position
    in args or a keyword). `call(x)` calls it again the same way with x as the input."""

    def __init__(self, module: torch.nn.Module, args: tuple, kwargs: dict, depth: int):
        self.module, self.args, self.kwargs, self.depth = module, args, kwargs, depth
        self.at: int | str | None = None

    def find_input(self, x0: torch.Tensor) -> bool:
        """Which argument is the input x0 (the same tensor, else an equal one); False when none is."""
        places = list(enumerate(self.args)) + list(self.kwargs.items())
        for same in (lambda v: v is x0, lambda v: isinstance(v, torch.Tensor) and v.shape == x0.shape
                     and v.dtype == x0.dtype and bool(torch.equal(v, x0))):
            hit = next((k for k, v in places if same(v)), None)
            if hit is not None:
                self.at = hit
                return True
        return False

    def __call__(self, x):
        args, kwargs = list(self.args), dict(self.kwargs)
        if isinstance(self.at, int):
            args[self.at] = x
        else:
            kwargs[self.at] = x
        return self.module(*args, **kwargs)

    def others(self) -> list[str]:
        """The arguments besides the input, named as the forward names them (the check's detail says them)."""
        try:
            names = list(inspect.signature(self.module.forward).parameters)
        except (TypeError, ValueError):
            names = []
        pos = [names[i] if i < len(names) else f"#{i}" for i in range(len(self.args)) if i != self.at]
        return pos + [k for k in self.kwargs if k != self.at]


def _bound(frame) -> tuple[tuple, dict]:
    """The arguments a frame's function was called with, at its call event: (positional, keyword), self left
    out; defaults are as the function received them."""
    co, loc = frame.f_code, frame.f_locals
    names = co.co_varnames
    n, k = co.co_argcount, co.co_kwonlyargcount
    args = [loc[v] for v in names[1:n] if v in loc]
    kwargs = {v: loc[v] for v in names[n:n + k] if v in loc}
    i = n + k
    if co.co_flags & CO_VARARGS:
        args += list(loc.get(names[i], ()))
        i += 1
    if co.co_flags & CO_VARKEYWORDS:
        kwargs.update(loc.get(names[i], {}) or {})
    return tuple(args), kwargs


def capture(fn, args) -> tuple[object, list[Call]]:
    """(output of fn(*args), the modules whose forward ran in the student's files, each at its first call, the
    outermost first)."""
    files, found = lm_loader.STATE.files, {}

    def trace(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "forward" and frame.f_code.co_filename in files:
            obj = frame.f_locals.get("self")
            if isinstance(obj, torch.nn.Module) and id(obj) not in found and len(found) < 200:
                depth, f = 0, frame
                while f is not None:
                    depth, f = depth + 1, f.f_back
                found[id(obj)] = Call(obj, *_bound(frame), depth)
        return None
    old = sys.gettrace()
    sys.settrace(trace)
    try:
        out = fn(*args)
    finally:
        sys.settrace(old)
    return out, sorted(found.values(), key=lambda c: c.depth)


def the_model(out, calls: list[Call], x0) -> Call | None:
    """The outermost recorded module with parameters whose call, made again with x0 as the input, reproduces
    the adapter's output `out`; None when none does."""
    if not isinstance(out, torch.Tensor):
        return None
    for c in calls:
        if not list(c.module.parameters()) or not c.find_input(x0):
            continue
        try:
            with torch.no_grad():
                again = c(x0)
        except (ProbeTimeout, MemoryError):
            raise
        except Exception:           # noqa: BLE001 - a module that cannot be called again is not the model
            continue
        if isinstance(again, torch.Tensor) and again.shape == out.shape \
                and torch.allclose(again, out, atol=1e-5, rtol=1e-5):
            return c
    return None
