"""Watch the torch calls a student's code makes, with the student's file:line (the recorder: recorder.py).

`watch()` records the calls of the operations named in WATCHED (the student's own `torch.softmax`,
`scores.masked_fill(...)`, `F.scaled_dot_product_attention`, a loss module's inner `F.cross_entropy`) with
their arguments as given: the probes' evidence (the arguments, the output) and its location (the innermost
frame in the student's file).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .recorder import Op, Recorder

# name -> the callables that count as that operation
WATCHED = {
    "softmax": (torch.softmax, torch.Tensor.softmax, F.softmax, torch.nn.functional.softmax),
    "masked_fill": (torch.masked_fill, torch.Tensor.masked_fill, torch.Tensor.masked_fill_),
    "triu": (torch.triu, torch.Tensor.triu),
    "tril": (torch.tril, torch.Tensor.tril),
    "cross_entropy": (F.cross_entropy,),
    "sdpa": (F.scaled_dot_product_attention,),
    "view": (torch.Tensor.view, torch.Tensor.reshape, torch.reshape),
    "detach": (torch.Tensor.detach, torch.Tensor.detach_),
    "nll_loss": (F.nll_loss,),
    "matmul": (torch.matmul, torch.Tensor.__matmul__, torch.Tensor.matmul, torch.bmm, torch.einsum,
               torch.Tensor.bmm),
    "pe_math": (torch.sin, torch.cos, torch.exp, torch.pow, torch.Tensor.__pow__,
                torch.Tensor.__rpow__, torch.Tensor.sin, torch.Tensor.cos, torch.Tensor.exp),
}
_BY_FUNC = {f: name for name, fs in WATCHED.items() for f in fs}
# Recorded even when no line of the student's file is on the stack (a loss module's, torch's own layers').
UNPLACED = ("cross_entropy", "softmax", "sdpa")


def watch(path: str, keep_outputs: tuple = ("softmax", "sdpa"), limit: int = 20000, only: tuple | None = None,
          also: dict | None = None, depth: int = 1) -> Recorder:
    """A recorder of the WATCHED calls (`only`: just these names) made from the student's file `path`: each an
    Op with its name, line, args and kwargs as given, and its output for the names in keep_outputs.
    also: more {callable: name} to watch for this recording; depth: the student's frames kept per op."""
    ops = _BY_FUNC if also is None else {**_BY_FUNC, **also}
    return Recorder(path, ops=ops, only=only, limit=limit, unplaced=UNPLACED, outputs="given",
                    keep_out=keep_outputs, inputs="given", depth=depth)


class LossTap:
    """Each loss the student's code computes, with no mode active: F.cross_entropy and F.nll_loss wrapped
    while `on` (the names a loss module and an `F.` call look up at call time; a function imported by name
    before is not seen, which `calls` tells). Put back with off() before any guard check: the guard watches
    torch.nn.functional. Only with no recorder active: a recorder would see the wrapper, not the loss."""

    NAMES = ("cross_entropy", "nll_loss")

    def __init__(self):
        self.losses, self.calls, self._orig = [], 0, {}

    def on(self) -> None:
        for name in self.NAMES:
            orig = getattr(F, name)
            self._orig[name] = orig
            setattr(F, name, self._wrap(orig))

    def _wrap(self, orig):
        import functools

        @functools.wraps(orig)
        def loss(*args, **kwargs):
            out = orig(*args, **kwargs)
            self.calls += 1
            if isinstance(out, torch.Tensor) and out.dim() == 0:
                self.losses.append(out.detach())
            return out
        loss._mtxdiag_tap = True
        return loss

    def off(self) -> None:
        """Put the originals back, unless the student's code replaced ours since (the guard names that)."""
        for name, orig in self._orig.items():
            if getattr(getattr(F, name), "_mtxdiag_tap", False):
                setattr(F, name, orig)
        self._orig.clear()


class StepLosses:
    """The loss of every optimizer step of a training loop, for the price of recording only the first.

    The recorder sees step 1 (the probes read the first loss call and its arguments); at that step's
    optimizer step it leaves the stack and a LossTap takes the later steps' losses. A tap that sees nothing
    by the next step is blind (the loss function was imported by name): the recorder resumes (that one step's
    loss is missing). A recorder that saw no loss call, or cannot leave the stack, records throughout. Call
    at_step(k) from an optimizer pre-step hook (step k's forward pass and loss are done), tap.off() before
    the student call ends."""

    def __init__(self, rec: Recorder):
        self.rec, self.tap, self.mode, self.since = rec, LossTap(), "record", None

    def at_step(self, k: int) -> None:
        if self.mode == "record" and any(c.name in LossTap.NAMES for c in self.rec.ops) and self.rec.stop():
            self.tap.on()
            self.mode, self.since = "tap", k
        elif self.mode == "tap" and k == self.since + 1 and not self.tap.calls:
            self.tap.off()
            self.rec.resume()
            self.mode = "record-all"

    def values(self) -> list[float]:
        """Scalar loss values in call order: the recorder's, then the tap's (it only ever took over)."""
        out = [float(c.out.detach()) for c in self.rec.ops if c.name in LossTap.NAMES
               and isinstance(c.out, torch.Tensor) and c.out.dim() == 0]
        return out + [float(v) for v in self.tap.losses]


def softmax_dim(call: Op) -> int | None:
    """The dim a recorded softmax normalised over, as a negative index."""
    dim = call.kwargs.get("dim", call.args[1] if len(call.args) > 1 else None)
    x = call.args[0]
    if dim is None or not isinstance(x, torch.Tensor):
        return None
    return int(dim) - x.dim() if int(dim) >= 0 else int(dim)


def sdpa_weights(call: Op) -> torch.Tensor:
    """Recompute the attention weights of a recorded scaled_dot_product_attention call."""
    import math
    q, k = call.args[0], call.args[1]
    mask = call.kwargs.get("attn_mask", call.args[3] if len(call.args) > 3 else None)
    causal = call.kwargs.get("is_causal", call.args[5] if len(call.args) > 5 else False)
    scale = call.kwargs.get("scale") or 1.0 / math.sqrt(q.size(-1))
    s = (q @ k.transpose(-2, -1)) * scale                            # (..., T_q, T_k)
    if causal:
        T_q, T_k = s.shape[-2:]
        s = s.masked_fill(~torch.ones(T_q, T_k, dtype=torch.bool, device=s.device).tril(), float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, dim=-1)


def attention_weights(rec: Recorder) -> list[torch.Tensor]:
    """Every attention-weight tensor computed while recording, in call order."""
    out = []
    for c in rec.ops:
        if c.name == "softmax" and isinstance(c.out, torch.Tensor) and c.out.dim() >= 2:
            out.append(c.out.detach())
        elif c.name == "sdpa":
            with torch.no_grad():
                out.append(sdpa_weights(c).detach())
    return out
