"""First divergence (harness/child/probes/lm/divergence.py): the line where a component's wrong values start."""
from types import SimpleNamespace

import pytest
import torch

import reference_model.lm as ref_model
import reference_model.lm_adapters as ref_adapters
from harness.child.probes.lm import components as lm_components
from harness.child.probes.lm import divergence as div
from harness.child.probes.lm.common import ADAPTER
from harness.selftest import changed_lines
from mutants.lm_export import load_module, mutant_single_file, reference_single_file
from mutants.lm_registry import lm_get

REF_FILES = {ref_model.__file__: "reference_model/lm.py", ref_adapters.__file__: "reference_model/lm_adapters.py"}


def _locate(text: str, comp: str):
    """Run one single-file variant against the reference on the component's first case."""
    mod = load_module(text, "mtx_div_test")
    _, build = lm_components.CASES[comp][0](0)[0]
    args = build()
    mine, result = div.record({"<mtx_div_test>": "model.py"}, getattr(mod, ADAPTER[comp]), args)
    theirs, expected = div.record(REF_FILES, getattr(ref_adapters, ADAPTER[comp]), build())
    return div.first_divergence(mine, result, theirs, div.inputs_of(args), expected=expected)


@pytest.mark.parametrize("mutant, comp", [
    ("lm-sdpa-unscaled", "sdpa"),                       # a step skipped: due on the line that made its input
    ("lm-sdpa-masked-with-zero", "sdpa"),               # right inputs, wrong output on the line itself
    ("lm-rmsnorm-gain-ignored", "rmsnorm"),             # the output is a value the reference has on the way
    ("lm-mha-heads-merged-without-transpose", "mha"),   # the step was due on the next line of that function
    ("lm-mha-causal-triu", "mha"),
    ("lm-rope-sin-cos-swapped", "rope"),                # right values under each other's names: where made
    ("lm-rope-sin-cos-swapped", "lm"),
    # an einsum where the reference multiplies by W^T is that step done wrongly, not a step skipped: the einsum's
    # line in the block too, not the block's line that calls the attention
    ("lm-mha-einsum-weight-diagonal", "mha"),
    ("lm-mha-einsum-weight-diagonal", "block"),
])
def test_first_divergence_is_the_mutated_line(mutant, comp):
    text = mutant_single_file(lm_get(mutant))
    found = _locate(text, comp)
    assert found is not None
    assert found["line"] in changed_lines(reference_single_file(), text), found


def test_tables_swapped_where_they_are_used_are_located_there_not_where_they_are_made():
    """The same values as lm-rope-sin-cos-swapped, but the tables keep their right names and the rotation pairs
    them wrongly: the line that pairs them is the bug (values alone cannot tell the two apart; names can)."""
    ref = reference_single_file()
    text = ref.replace("rot1 = x1 * cos - x2 * sin", "rot1 = x1 * sin - x2 * cos").replace(
        "rot2 = x1 * sin + x2 * cos", "rot2 = x1 * cos + x2 * sin")
    assert text != ref
    found = _locate(text, "rope")
    assert found is not None and "used_at" not in found
    assert found["line"] in changed_lines(ref, text), found


def test_the_reference_has_no_divergence():
    assert _locate(reference_single_file(), "mha") is None


def test_a_different_but_correct_style_is_not_blamed():
    """rsqrt instead of 1 / sqrt makes values the reference never computes; their chain ends before the output."""
    text = reference_single_file().replace(
        "rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)  # (..., 1)\n"
        "        return (x / rms * self.weight).to(in_dtype)",
        "inv = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)\n"
        "        return (x * inv * self.weight).to(in_dtype)")
    assert "rsqrt" in text
    assert _locate(text, "rmsnorm") is None
    mod = load_module(text, "mtx_div_style")
    _, build = lm_components.CASES["rmsnorm"][0](0)[0]
    assert torch.allclose(getattr(mod, "run_rmsnorm")(*build()), ref_adapters.run_rmsnorm(*build()), atol=1e-5)


@pytest.mark.parametrize("mutant", ["lm-schedule-cosine-over-full-cycle", "lm-schedule-no-floor",
                                    "lm-adamw-decay-not-scaled-by-lr", "lm-adamw-eps-inside-sqrt",
                                    "lm-clipping-per-parameter",
                                    "lm-adamw-no-bias-correction"])   # right tensors, wrong number: where it is made
def test_training_divergence_is_the_mutated_line(mutant):
    """Optimizer and clipping op by op; the schedule (plain numbers) line by line."""
    m = lm_get(mutant)
    text = mutant_single_file(m)
    mod = load_module(text, "mtx_div_test")
    comp = m.component.replace("_", "-")
    check = {"status": "fail", "data": {"cases": []}}
    if comp == "lr-schedule":         # the probe's first failing iteration, as its check records it
        hp = (1.0, 0.1, 7, 21)
        it = next(i for i in range(30) if abs(mod.run_get_lr_cosine_schedule(i, *hp) -
                                              ref_adapters.run_get_lr_cosine_schedule(i, *hp)) > 1e-6)
        check["data"]["cases"] = [{"case": f"max/min/warmup/cycle = {hp}", "first_bad_it": it}]
    ctx = SimpleNamespace(seed=0, module=mod)
    found = lm_components._locate_training(ctx, comp, check, div, {"<mtx_div_test>": "model.py"}, ref_adapters)
    assert found is not None
    assert found["line"] in changed_lines(reference_single_file(), text), found


