"""The learning rate of the student's train() sampled at every optimizer step, against its warm-up.

A warm-up raises the lr gradually to its peak. One written with an integer division (`step // warmup`, or
`int(step / warmup)`) is 0 for every step of the warm-up and then the full peak at once: the first steps are
wasted and the peak arrives with Adam's moments still estimated on nothing, the very jump a warm-up exists to
avoid. The trace's lr at each step (training.py) shows it as a long flat stretch under half the peak ended by
a single rise of more than half the peak.
"""
from __future__ import annotations

import ast

from ...checks import bound, num, value
from .base import check, rnd


def _jump(lrs: list) -> dict | None:
    """The largest one-step rise (as a share of the peak) with how long the lr stayed flat under half the peak
    before it; None without a positive finite peak."""
    finite = [v for v in lrs if v == v and abs(v) != float("inf")]
    peak = max(finite, default=0.0)
    if peak <= 0 or len(finite) != len(lrs):
        return None
    below = value("lr-warmup-ramp", "flat_below") * peak
    best = {"rise": 0.0, "step": None, "flat": 0, "before": None, "after": None}
    flat = 0
    for i in range(1, len(lrs)):
        flat = flat + 1 if lrs[i - 1] < below else 0
        rise = (lrs[i] - lrs[i - 1]) / peak
        if rise > best["rise"]:
            best = {"rise": rise, "step": i + 1, "flat": flat, "before": lrs[i - 1], "after": lrs[i]}
    best["peak"] = peak
    return best


def floor_division_line(ctx, fallback: int | None) -> int | None:
    """The origin: a floor division (`//`) or an int(.../...) whose operands name the warm-up, anywhere in the
    file (the scheduler's lambda, or the function it calls); else `fallback` (the scheduler's line)."""
    try:
        tree = ast.parse(ctx.source.text)
    except SyntaxError:
        return fallback
    hits = []
    for node in ast.walk(tree):
        div = isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv)
        cast = isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "int" and \
            len(node.args) == 1 and isinstance(node.args[0], ast.BinOp) and isinstance(node.args[0].op, ast.Div)
        if (div or cast) and "warm" in ast.unparse(node).lower():
            hits.append(node.lineno)
    return min(hits) if hits else fallback


def ramp(ctx, lrs: list, warmup, sched_line: int | None) -> dict:
    """Check lr-warmup-ramp on the lr train() set at each optimizer step."""
    j = _jump(lrs)
    limit, min_flat = bound("lr-warmup-ramp"), value("lr-warmup-ramp", "min_flat")
    expected = (f"{limit} of the peak: a gradual warm-up, no single step raises the lr by more than that after "
                f"{min_flat} or more steps under {num(value('lr-warmup-ramp', 'flat_below'))} of it")
    if j is None:
        return check("lr-warmup-ramp", "skip", None, expected, "no positive finite learning rate to measure")
    bad = not limit.ok(j["rise"]) and j["flat"] >= min_flat
    detail = (f"the lr stayed at {j['before']:.2e} for {j['flat']} steps, then rose to {j['after']:.2e} at step "
              f"{j['step']} in one step ({num(round(j['rise'], 3))} of its peak {j['peak']:.2e}); train()'s "
              f"warmup is {warmup}" if bad else
              f"largest one-step rise {num(round(j['rise'], 4))} of the peak {j['peak']:.2e}"
              + (f" at step {j['step']}" if j["step"] else ""))
    return check("lr-warmup-ramp", "fail" if bad else "pass", rnd(j["rise"], 4), expected, detail,
                 data={"rise": rnd(j["rise"], 4), "flat_steps": j["flat"], "step": j["step"], "warmup": warmup,
                       **({"mechanism": {"kind": "flat-then-jump", "text": detail}} if bad else {})},
                 location=ctx.where(floor_division_line(ctx, sched_line)) if bad else None)
