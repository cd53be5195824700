"""The recorder configurations the role probes use: the softmax and dropout calls of one forward pass, with the
student's line of each (harness/child/recorder.py: a configuration, not a new mode)."""
from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F

from ...recorder import Recorder
from . import remote

SOFTMAX = {torch.softmax: "softmax", F.softmax: "softmax", torch.Tensor.softmax: "softmax"}
DROPOUT = {F.dropout: "dropout", torch.dropout: "dropout", torch.nn.functional.scaled_dot_product_attention: "sdpa"}


def file_of(obj) -> str | None:
    if remote.is_remote(obj):
        return getattr(obj.__class__, "__mtxdiag_file__", None)
    try:
        cls = obj if inspect.isclass(obj) else type(obj)
        return inspect.getsourcefile(cls)
    except (TypeError, OSError):
        return None


def softmaxes(module, call) -> list:
    """The softmax calls made from the module's file while `call()` runs: (line, output copy)."""
    if remote.is_remote(module):
        return [(_line(module, r), r["value"]) for r in remote.records(module, call, ("softmax",))
                if isinstance(r.get("value"), torch.Tensor)]
    path = file_of(module)
    if path is None:
        return []
    rec = Recorder(path, ops=SOFTMAX, outputs="copies")
    with rec:
        call()
    return [(op.line, op.outs[0]) for op in rec.ops if op.outs]


def dropouts(module, call) -> list:
    """The dropout (and fused attention) calls made from the module's file while `call()` runs: (name, line,
    the shape it dropped, whether it was told it trains)."""
    if remote.is_remote(module):
        return [(r["op"], _line(module, r), tuple(int(n) for n in r.get("shape") or () if type(n) is int),
                 bool(r.get("trains"))) for r in remote.records(module, call, ("dropout",))
                if r["op"] == "sdpa" or r.get("p") != 0]
    path = file_of(module)
    if path is None:
        return []
    rec = Recorder(path, ops=DROPOUT, inputs="given")
    with rec:
        call()
    out = []
    for op in rec.ops:
        x = op.args[0] if op.args else op.kwargs.get("input")
        if op.name == "sdpa":
            out.append(("sdpa", op.line, tuple(getattr(x, "shape", ())), True))
            continue
        if op.kwargs.get("train") is not None or op.kwargs.get("training") is not None:
            trains = op.kwargs.get("train", op.kwargs.get("training"))
        elif len(op.args) > 2:
            trains = op.args[2]
        else:
            trains = True           # F.dropout's default
        p = op.args[1] if len(op.args) > 1 else op.kwargs.get("p", 0.5)
        if isinstance(p, (int, float)) and p == 0:
            continue
        out.append(("dropout", op.line, tuple(getattr(x, "shape", ())), bool(trains)))
    return out


def _line(module, rec: dict) -> int | None:
    """A record's line, kept only when it lies within the module's file (the server's word is evidence)."""
    client = object.__getattribute__(module, "_client")
    return client.line_in(remote.file_rel(module), rec.get("line"))


def masks(module, call) -> list:
    """The masks handed to the module's submodules during `call()` (keyword arguments named *mask*), copies."""
    if remote.is_remote(module):
        return [r["value"] for r in remote.records(module, call, ("mask",)) if isinstance(r.get("value"),
                                                                                         torch.Tensor)]
    seen = []

    def hook(mod, args, kwargs):
        for k, val in kwargs.items():
            if "mask" in k and isinstance(val, torch.Tensor):
                seen.append(val.detach().clone())
    handles = [sub.register_forward_pre_hook(hook, with_kwargs=True) for sub in module.modules() if sub is not module]
    try:
        call()
    finally:
        for h in handles:
            h.remove()
    return seen


def module_outputs(module, call) -> list:
    """(submodule name, output copy) of every submodule that returns a tensor during `call()`, in call order."""
    if remote.is_remote(module):
        return [(str(r.get("name", "")), r["value"]) for r in remote.records(module, call, ("module",))
                if isinstance(r.get("value"), torch.Tensor)]
    outs: list = []
    names = {id(x): k for k, x in module.named_modules()}

    def hook(mod, args, out):
        if isinstance(out, torch.Tensor):
            outs.append((names[id(mod)], out.detach().clone()))
    hs = [x.register_forward_hook(hook) for x in module.modules() if x is not module]
    try:
        call()
    finally:
        for h in hs:
            h.remove()
    return outs
