"""Permutation equivariance as a first-divergence property (harness/child/probes/trace.tokens_permuted): a correct
head split keeps the token axis (scores keep two), a view that cuts heads across tokens breaks it first."""
from __future__ import annotations

import torch

from harness.child.probes import trace


def _ops(x):
    """A toy attention's ops on x (T, B, d), once with a correct split and once time-major cut wrongly."""
    T, B, d = x.shape
    h, hd = 4, d // 4
    good = x.reshape(T, B * h, hd).transpose(0, 1)                 # (B*h, T, hd): token axis kept
    bad = x.contiguous().view(B * h, T, hd)                        # tokens and batch mixed
    scores = good @ good.transpose(1, 2)                           # (B*h, T, T)
    return [trace.Op("linear", 10, [x]), trace.Op("view", 11, [bad]), trace.Op("bmm", 12, [scores])], \
        [trace.Op("linear", 10, [x]), trace.Op("transpose", 11, [good]), trace.Op("bmm", 12, [scores])]


def test_the_first_op_that_mixes_tokens_is_found():
    torch.manual_seed(0)
    x = torch.randn(7, 2, 16)
    perm = torch.tensor([3, 0, 6, 5, 1, 4, 2])
    bad_a, good_a = _ops(x)
    bad_b, good_b = _ops(x[perm])
    prop = trace.tokens_permuted(7, perm)
    assert trace.first_divergence(good_a, good_b, prop) is None          # scores: both axes permuted
    first = trace.first_divergence(bad_a, bad_b, prop)
    assert first is not None and first.line == 11


def test_no_token_axis_cannot_be_judged():
    prop = trace.tokens_permuted(7, torch.arange(7))
    assert prop(torch.zeros(3, 5), torch.ones(3, 5)) is None
    assert prop(torch.zeros(7, 5), torch.zeros(7, 6)) is None
