"""The overfit probe stops at the first step under its pass line, and a model that cannot memorise runs to the
limit and fails; the probes' seeding gives the CPU generator what torch.manual_seed gives it."""
from __future__ import annotations

from pathlib import Path

import torch

import mutants
from harness.child.loader import load, read_source
from harness.child.probes import overfit
from harness.child.probes.base import Context, manual_seed

ROOT = Path(__file__).resolve().parents[2]


def _overfit(path: Path):
    src = read_source(str(path), path.read_bytes())
    # in-process, the machine's speed is not calibrated (a check's child measures it): a loaded test machine
    # (the suite on every core) gets the stretched time budget a loaded grading machine gets from calibration;
    # what is tested is the probe's decision, not the machine's speed
    ctx = Context(load(src), src, "reversal", slowdown=10.0)
    [c] = overfit.overfit(ctx)
    return c, ctx.artifacts["overfit"]


def test_the_lesson_memorises_and_the_probe_stops_at_the_first_step_under_the_line():
    c, curve = _overfit(ROOT / "submissions" / "reversal_lesson.py")
    assert c["status"] == "pass" and c["data"]["steps"] == len(curve)
    assert curve[-1] < overfit.OVERFIT_PASS <= min(curve[:-1])       # stopped there, not later
    low, high = (int(x) for x in overfit.OVERFIT_STEPS_CORRECT.split("-"))
    assert low <= len(curve) <= high                                   # inside the calibrated spread


def test_a_model_that_cannot_memorise_runs_to_the_limit_and_fails(tmp_path):
    p = tmp_path / "ignored.py"
    p.write_text(mutants.source(mutants.get("reversal-source-ignored")))   # the target is unknowable
    c, curve = _overfit(p)
    assert c["status"] == "fail" and len(curve) == overfit.OVERFIT_MAX_STEPS
    assert min(curve) >= overfit.OVERFIT_PASS


def test_the_probes_seed_gives_the_cpu_generator_what_torch_manual_seed_gives():
    torch.manual_seed(123)
    want = torch.rand(5)
    torch.manual_seed(0)
    manual_seed(123)
    assert torch.equal(torch.rand(5), want) and torch.initial_seed() == 123
