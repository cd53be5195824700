"""greedy_decode on a batch gives each row what it gives that row alone.

Rows end (emit EOS) at different steps; a loop whose stop test looks at one row (`next_token[0] == EOS`) or
at any row (`.any()` for `.all()`) cuts the other rows short, and training never shows it. Sources of equal
length, so no padding is involved: a padding bug is the padding probes' business, not this one's.
"""
from __future__ import annotations

import ast

import torch

from . import locate
from .base import Skip, check
from .common import EOS, VOCAB, batch, eval_model, kwargs_for

ROWS, LENGTH, MAX_LEN = 8, 6, 12


def _tokens(ys) -> torch.Tensor:
    ys = ys[0] if isinstance(ys, (tuple, list)) else ys
    if not isinstance(ys, torch.Tensor) or ys.dim() != 2:
        raise Skip("greedy_decode does not return (B, T) tokens first")
    return ys


def _until_eos(row: list) -> list:
    """Generated tokens up to and including the first EOS (the SOS at index 0 left out)."""
    out = []
    for t in row[1:]:
        out.append(t)
        if t == EOS:
            break
    return out


def batch_rows(ctx):
    decode = ctx.need("greedy_decode")
    model = eval_model(ctx)
    src, _ = batch(ctx, ROWS, LENGTH, LENGTH, seed_offset=52)                # (8, 6), no padding
    kw = kwargs_for(decode, max_len=MAX_LEN)
    head = _vocab_module(ctx, model, decode, src[:1], kw)
    exercised, hook = None, None
    try:
        for nudge in NUDGES:
            if hook is not None:
                hook.remove()
                hook = None
            if nudge and head is None:
                break
            hook = head.register_forward_hook(_raise_eos(nudge)) if nudge else None
            with torch.no_grad(), ctx.student("greedy_decode(model, src)"):
                alone = [_until_eos(_tokens(decode(model, src[i:i + 1], **kw))[0].tolist()) for i in range(ROWS)]
            if len({len(r) for r in alone}) > 1 and any(EOS in r for r in alone):
                exercised = nudge                        # rows end at different steps: the stop test is exercised
                break
        if exercised is None:
            raise Skip("no row ends before max_len at init, even with its EOS logit raised: the stop test is not "
                       "exercised" + ("" if head is not None else " (no module outputs the vocabulary's logits)"))
        # the row that ends first goes first: a stop test on row 0 then fires while the others still generate
        order = sorted(range(ROWS), key=lambda i: (EOS not in alone[i], len(alone[i])))
        with torch.no_grad(), ctx.student("greedy_decode(model, src)"):
            together = _tokens(decode(model, src[order], **kw))
    finally:
        if hook is not None:
            hook.remove()
    if together.size(0) != ROWS:
        raise Skip("greedy_decode returns a different number of rows than sources")
    rows_b = [_until_eos(together[i].tolist()) for i in range(ROWS)]
    rows_a = [alone[i] for i in order]
    differ = [i for i in range(ROWS) if rows_b[i] != rows_a[i]]
    # cut short: the batch row is a strict prefix of the row alone, with no EOS, while some other row ended
    cut = [i for i in differ if len(rows_b[i]) < len(rows_a[i]) and rows_a[i][:len(rows_b[i])] == rows_b[i]
           and EOS not in rows_b[i]]
    ended = [i for i in range(ROWS) if EOS in rows_b[i]]
    kind = ("stops-early" if cut and len(cut) == len(differ) and ended else "differs" if differ else "ok")
    line = _stop_line(ctx) if kind == "stops-early" else None
    detail = (f"{len(differ)} of {ROWS} rows differ from the same source decoded alone" if differ else
              f"all {ROWS} rows equal their source decoded alone")
    if kind == "stops-early":
        first = min(len(rows_b[i]) for i in ended)
        detail += (f"; {len(cut)} rows were cut after {together.size(1) - 1} generated tokens, without EOS, when "
                   f"row(s) {ended[:4]} had ended (the first after {first} tokens); alone they go on")
    data = {"kind": kind, "differ": differ, "cut": cut, "ended": ended, "eos_logit_raised_by": exercised,
            "width": int(together.size(1)), "lengths_alone": [len(r) for r in rows_a]}
    return [check("decode-batch-rows", "pass" if not differ else "fail", len(differ), "0 rows differ",
                  detail, data=data, location=ctx.where(line))]


# At init a model may never pick EOS within max_len. Raising the EOS logit (a hook on the module that outputs
# the vocabulary's logits) makes rows end at different steps; a row's tokens still must not depend on the others.
NUDGES = (0.0, 1.0, 2.0, 4.0)


def _raise_eos(by: float):
    def hook(module, args, out):
        if isinstance(out, torch.Tensor) and out.size(-1) == VOCAB:
            out = out.clone()
            out[..., EOS] += by
            return out
        return None
    return hook


def _vocab_module(ctx, model, decode, src, kw):
    """The last module called inside greedy_decode whose output's last axis is the vocabulary (the head)."""
    seen = []
    hooks = [m.register_forward_hook(lambda m, a, o: seen.append(m) if isinstance(o, torch.Tensor) and o.dim()
                                     and o.size(-1) == VOCAB else None)
             for m in model.modules() if m is not model]
    try:
        with torch.no_grad(), ctx.student("greedy_decode(model, src)"):
            decode(model, src, **kw)
    finally:
        for h in hooks:
            h.remove()
    return seen[-1] if seen else None


def _stop_line(ctx) -> int | None:
    """The loop's stop in greedy_decode: an `if ...: break` or a while condition, preferring one whose test
    mentions EOS (a `for` over max_len may also break, or a while count the steps)."""
    stops = []
    for fn in locate.functions(ctx, "greedy_decode"):
        for node in ast.walk(fn):
            if isinstance(node, ast.If) and any(isinstance(n, ast.Break) for n in ast.walk(node)):
                stops.append((node.lineno, node.test))
            elif isinstance(node, ast.While) and not isinstance(node.test, ast.Constant):
                stops.append((node.lineno, node.test))
    stops.sort(key=lambda st: st[0])             # ast.walk is breadth-first: the first in the text first
    eos = [line for line, test in stops if "eos" in ast.unparse(test).lower()]
    return (eos or [line for line, _ in stops] or [None])[0]
