"""The recorder configurations the role probes use: the softmax and dropout calls of one forward pass, with the
student's line of each (harness/child/recorder.py: a configuration, not a new mode)."""
from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F

from ...recorder import Recorder

SOFTMAX = {torch.softmax: "softmax", F.softmax: "softmax", torch.Tensor.softmax: "softmax"}
DROPOUT = {F.dropout: "dropout", torch.dropout: "dropout", torch.nn.functional.scaled_dot_product_attention: "sdpa"}


def file_of(obj) -> str | None:
    try:
        cls = obj if inspect.isclass(obj) else type(obj)
        return inspect.getsourcefile(cls)
    except (TypeError, OSError):
        return None


def softmaxes(module, call) -> list:
    """The softmax calls made from the module's file while `call()` runs: (line, output copy)."""
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
