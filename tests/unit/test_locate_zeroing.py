"""Where piled-up gradients (and a too-low learning rate) are fixed (harness/child/probes/locate.zeroing_line): a zero_grad that runs outside the
loop that steps, or that loop's backward() when nothing zeroes at all; the step's own line is never guessed
past when zero_grad sits inside the loop already (something else accumulates: no better line)."""
from __future__ import annotations

import ast

from harness.child.probes import locate


def _fn(text: str) -> ast.FunctionDef:
    return ast.parse(text).body[0]


def test_zero_grad_outside_the_stepping_loop_is_the_line():
    fn = _fn("def train(m, opt):\n"          # 1
             "    opt.zero_grad()\n"         # 2: runs once
             "    for s in range(9):\n"      # 3
             "        for k in range(4):\n"  # 4
             "            m(k).backward()\n"  # 5
             "        opt.step()\n")         # 6
    assert locate.zeroing_line(fn, 6) == 2


def test_no_zero_grad_points_at_the_backward_of_the_loop():
    fn = _fn("def train(m, opt):\n"
             "    for s in range(9):\n"
             "        loss = m(s)\n"
             "        loss.backward()\n"     # 4
             "        opt.step()\n")
    assert locate.zeroing_line(fn, 5) == 4


def test_zero_grad_inside_the_loop_gives_no_line_and_outside_any_loop_none():
    fn = _fn("def train(m, opt):\n"
             "    for s in range(9):\n"
             "        if s % 2:\n"
             "            opt.zero_grad()\n"
             "        m(s).backward()\n"
             "        opt.step()\n")
    assert locate.zeroing_line(fn, 6) is None
    assert locate.zeroing_line(_fn("def train(m, opt):\n    m(0).backward()\n    opt.step()\n"), 3) is None


def test_a_low_peak_with_a_fine_base_lr_is_the_schedulers_doing():
    from harness.checks import bound
    from harness.child.probes.training import _low_lr_line
    min_peak = bound("lr-schedule")
    low = 1e-9
    assert not min_peak.ok(low)
    # the optimizer's lr is fine and the scheduler scales it down (a lambda returning lr * factor): the scheduler
    assert _low_lr_line(min_peak, low, {"base_lr": 1e-3}, lr_line=3, sched_line=5) == 5
    # the optimizer's own lr is too low, or there is no scheduler to blame: where the lr's value comes from
    assert _low_lr_line(min_peak, low, {"base_lr": 1e-9}, lr_line=3, sched_line=5) == 3
    assert _low_lr_line(min_peak, low, {}, lr_line=3, sched_line=5) == 3
    # a peak that is fine but reached wrongly (no warmup): the schedule
    assert _low_lr_line(min_peak, 1e-3, {}, lr_line=3, sched_line=5) == 5
