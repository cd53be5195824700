"""The brief lm training (probes/lm_train_brief.py), in-process on single files: the reference trains like the
reference; a mutant of AdamW or of the schedule fails it, located on its piece and its function; an optimizer
that divides 0 by 0 is located at the first non-finite value (the step, in AdamW)."""
from __future__ import annotations

import math

import pytest

from harness.child import lm_loader
from harness.child.calibrate import slowdown
from harness.child.probes.lm import train_brief as T
from harness.child.probes.base import Context
from mutants.lm_export import mutant_single_file, reference_single_file
from mutants.lm_registry import lm_get


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread, as the child under `grade`: on a loaded machine torch's thread pool spins and a
    40-step training takes minutes instead of seconds."""
    import torch
    was = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(was)


def run(tmp_path, text: str, name: str):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    source, module = lm_loader.load(str(path), str(path), path.read_bytes(), 60.0)
    ctx = Context(module=module, source=source, assignment="lm", seed=0, slowdown=slowdown())   # as the child
    [c] = T.brief_training(ctx)
    return c, ctx.artifacts.get("lm_training")


def test_the_reference_trains_like_the_reference(tmp_path):
    c, art = run(tmp_path, reference_single_file(), "reference")
    assert c["status"] == "pass", c["detail"]
    m = c["measured"]
    assert abs(m["first_loss"] - math.log(art["vocab"])) <= T.FIRST_LOSS_TOL
    assert m["overfit_loss"] <= T.OVERFIT_RATIO * art["overfit"][0] and m["curve_gap"] == 0
    assert len(art["loss"]) == len(art["ref"]) == T.CURVE_STEPS and art["nan"] is None


@pytest.mark.parametrize("mutant, component, function", [
    ("lm-adamw-no-bias-correction", "adamw", "AdamW.step"),
    ("lm-schedule-cosine-over-full-cycle", "lr-schedule", "cosine_lr"),
])
def test_a_broken_optimizer_or_schedule_fails_the_training_where_it_is(tmp_path, mutant, component, function):
    c, art = run(tmp_path, mutant_single_file(lm_get(mutant)), "student")
    assert c["status"] == "fail" and c["data"]["component"] == component, c["detail"]
    assert c["data"]["culprits"] == [{"lr-schedule": "lr-schedule"}.get(component, component)]
    assert c["location"]["function"] == function and c["location"]["line"] > 0
    assert "only your" in c["detail"] and art["ref"] != art["loss"]


def test_a_nan_is_located_at_the_first_stage_that_makes_it(tmp_path):
    text = reference_single_file().replace("p.addcdiv_(m, v.sqrt().add_(eps), value=-alpha_t)",
                                           "p.addcdiv_(m, v.sqrt(), value=-alpha_t)")
    assert "v.sqrt(), value" in text            # no eps: a gradient of exactly 0 gives 0 / 0
    c, art = run(tmp_path, text, "student")
    assert c["status"] == "fail" and c["data"]["nan"]["stage"] == "step" and c["data"]["component"] == "adamw"
    assert c["location"]["function"] == "AdamW.step" and art["nan"]["stage"] == "step"
