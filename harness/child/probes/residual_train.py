"""The residual stream in training: dropout belongs on a sublayer's output, never on the stream itself.

`x = norm(x + dropout(sublayer(x)))` drops part of what the sublayer adds; `x = dropout(norm(x + sublayer(x)))`
drops the whole stream, the input's own component included, at every layer of every training step. Eval mode
cannot see the difference (dropout is off there), so the property is measured in train mode: with every
Linear of the layer zeroed the sublayers add nothing, and a layer whose skip path is intact gives in train
mode exactly what it gives in eval mode (norm(x), or x). A layer that drops its stream gives the eval output
with a share of its values set to exactly 0 and the rest scaled by one factor, 1/(1-p): that signature is the
mechanism, and the dropout op whose output has those zeros is its line.
"""
from __future__ import annotations

import torch

from ...checks import bound, num, value
from . import trace
from .base import Skip, StudentError, check, manual_seed, rnd
from .common import kwargs_for

LAYERS = ("EncoderLayer", "DecoderLayer")


def _zeroed(ctx, cls, name: str):
    """The layer with every Linear silenced: weights zeroed, and its output replaced by zeros (a hook: a
    parametrized or weight-normed Linear computes its weight anew on every call)."""
    p = value("residual-train", "dropout")
    with ctx.student(f"{name}(64, 4, 256)"):
        layer = cls(64, 4, 256, **kwargs_for(cls, dropout=p)).to(ctx.device)
    with torch.no_grad():
        for m in layer.modules():
            if isinstance(m, torch.nn.Linear):
                m.register_forward_hook(lambda mod, args, out: torch.zeros_like(out))
                if isinstance(m.weight, torch.nn.Parameter):
                    m.weight.zero_()
                if m.bias is not None:
                    m.bias.zero_()
    return layer


def silenced(x: torch.Tensor, e: torch.Tensor) -> bool:
    """Whether the eval-mode output is what a layer whose sublayers add nothing gives: the input itself, or
    the input normalised (LayerNorm or RMSNorm at their initial gain 1 and bias 0, once or several times)."""
    x, e = x.double(), e.double()
    centred = x - x.mean(-1, keepdim=True)
    for c in (x, centred / (centred.pow(2).mean(-1, keepdim=True) + 1e-5).sqrt(),
              x / (x.pow(2).mean(-1, keepdim=True) + 1e-6).sqrt()):
        if c.shape == e.shape and float((e - c).abs().max()) <= 1e-2 * max(float(c.abs().max()), 1.0):
            return True
    return False


def _change(e: torch.Tensor, t: torch.Tensor) -> float:
    """max |t - e| relative to the output's scale (at least 1)."""
    e, t = e.double(), t.double()
    return float((t - e).abs().max()) / max(float(e.abs().max()), 1.0) if e.numel() else 0.0


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def stream_dropouts(ops: list, shape: tuple) -> list:
    """The dropout ops that, with the sublayers silenced, drop something of the stream's shape that is not zero:
    a sublayer's output is 0 there (and its dropout's too), the attention weights have another shape, so what is
    left is the stream itself (x, or norm(x + ...)) going through a dropout."""
    from .randomness import DROPOUT_OPS
    return [op for op in ops if op.name in DROPOUT_OPS and op.outs and tuple(op.outs[0].shape) == shape
            and bool((op.outs[0] != 0).any())]


def residual_train(ctx):
    """Each layer, Linear weights zeroed, in train mode against eval mode: the stream passes unchanged."""
    x = torch.randn(2, 6, 64, device=ctx.device)
    mem = torch.randn(2, 5, 64, device=ctx.device)
    limit, rows, worst, unmeasured = bound("residual-train"), [], None, []
    for name in LAYERS:
        if not ctx.has(name):
            continue
        manual_seed(ctx.seed)
        try:
            layer = _zeroed(ctx, getattr(ctx.module, name), name)

            def run():
                return _first(layer(x) if name == "EncoderLayer" else layer(x, mem))
            with torch.no_grad(), ctx.student(f"{name}.forward"):
                layer.eval()
                e = run()
                layer.train()
                manual_seed(ctx.seed)
                t = run()
        except StudentError as err:      # another interface than the contract's (time-major, other arguments)
            unmeasured.append(f"{name}: {err}")
            continue
        if not (isinstance(e, torch.Tensor) and isinstance(t, torch.Tensor)) or e.shape != t.shape or \
                not (bool(torch.isfinite(e).all()) and bool(torch.isfinite(t).all())):
            unmeasured.append(f"{name}: its train- and eval-mode outputs are not finite tensors of one shape")
            continue
        if not silenced(x, e):
            unmeasured.append(f"{name}: its sublayers could not be silenced (with every nn.Linear giving 0 its "
                              f"eval-mode output is neither its input nor the input normalised)")
            continue
        d = _change(e, t)
        row = {"layer": name, "change": rnd(d, 6)}
        if not limit.ok(d):
            with ctx.student(f"{name}.forward"):
                layer.train()
                ops = trace.record(ctx, run, seed=ctx.seed)
            hits = stream_dropouts(ops, tuple(e.shape))
            row.update(dropped=len(hits), line=hits[0].line if hits else None)
        rows.append(row)
        if worst is None or (row["change"] or 0) > (worst["change"] or 0):
            worst = row
    if not rows:
        raise Skip("; ".join(unmeasured) if unmeasured else "neither EncoderLayer nor DecoderLayer is defined")
    ok = limit.ok(worst["change"] or 0.0)
    dropped = not ok and bool(worst.get("dropped"))
    detail = (f"{worst['layer']} with its sublayers silenced (Linear weights zeroed) changes by {num(worst['change'])} "
              f"from eval to train mode: a dropout is applied to the residual stream itself, the skip path "
              f"included" + (f" (line {worst['line']})" if worst.get("line") else "") if dropped else
              f"largest change of a layer's output between eval and train mode with its sublayers silenced: "
              f"{num(worst['change'])} ({worst['layer']})")
    return [check("residual-train", "pass" if ok else "fail", worst["change"],
                  f"{limit}: with the sublayers adding nothing, train mode passes the stream as eval mode does",
                  detail, data={"layers": rows, "not_measured": unmeasured,
                                **({"mechanism": {"kind": "stream-dropped", "line": worst.get("line"),
                                                  "text": detail}} if dropped else {})},
                  location=ctx.where(worst.get("line")) if dropped else None)]
