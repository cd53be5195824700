"""The child's replay of a failing lm component as the course's own tests call it (harness/child/probes/lm/diag/
course.py, issue 47 item 2): keyword calls on the course's shapes and tolerances. In-process, on the reference
and the lm mutants' single-file modules; no child process."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.child.probes.lm.diag.course import replay
from harness.child.probes.lm.diag.fingerprint import variant
from harness.child.probes.lm.diag.inputs import ADAPTER


def _adapter(mutant, comp):
    return getattr(variant(mutant), ADAPTER[comp])


@pytest.mark.parametrize("comp", ["linear", "rmsnorm", "sdpa", "rope", "mha_rope", "block", "cross_entropy",
                                  "gradient_clipping", "lr_schedule", "get_batch"])
def test_the_reference_passes_the_courses_tests(comp):
    r = replay(comp, _adapter(None, comp))
    assert r["visible"] is False and r["test"].startswith("test_")


@pytest.mark.parametrize("mutant,comp", [
    ("lm-rmsnorm-no-upcast", "rmsnorm"),                  # the course runs float32
    ("lm-rope-ignores-token-positions", "rope"),          # ... positions 0..11
    ("lm-softmax-ignores-dim", "softmax"),                # ... dim -1 only
    ("lm-clipping-always-rescales", "gradient_clipping"),  # ... a max norm every gradient exceeds
])
def test_bugs_the_course_cannot_see_pass_its_inputs(mutant, comp):
    assert replay(comp, _adapter(mutant, comp))["visible"] is False


@pytest.mark.parametrize("mutant,comp,test", [
    ("lm-mha-heads-split-without-transpose", "mha", "test_multihead_self_attention"),
    ("lm-rmsnorm-wrong-axis", "rmsnorm", "test_rmsnorm"),
    ("lm-interface-adapter-returns-none", "rmsnorm", "test_rmsnorm"),
    ("lm-schedule-warmup-off-by-one", "lr_schedule", "test_get_lr_cosine_schedule"),
])
def test_bugs_the_course_sees_fail_its_inputs(mutant, comp, test):
    r = replay(comp, _adapter(mutant, comp))
    assert r["visible"] is True and r["test"] == test and (r.get("problem") or r["max_abs"] > r["tolerance"])


def test_the_courses_keyword_names_are_part_of_what_it_sees():
    # positional calls work, the course's keyword call does not: the course's test fails
    def run_linear(d_in, d_out, weight, x):
        return x @ weight.T
    r = replay("linear", run_linear)
    assert r["visible"] is True and "unexpected keyword argument" in r["problem"]


def test_a_get_batch_that_ignores_its_device_is_seen():
    def run_get_batch(dataset, batch_size, context_length, device):
        starts = np.random.randint(0, len(dataset) - context_length, batch_size)
        x = torch.as_tensor(np.stack([dataset[s:s + context_length] for s in starts]))
        y = torch.as_tensor(np.stack([dataset[s + 1:s + 1 + context_length] for s in starts]))
        return x, y
    r = replay("get_batch", run_get_batch)
    assert r["visible"] is True and "cuda:99" in r["problem"]
