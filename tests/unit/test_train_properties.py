"""Issue 48's properties measured in training, on their pure parts: the lr's flat-then-jump, the floor division
that makes it, the dropout of the stream and the dropout of masked scores told from their recorded ops."""
from __future__ import annotations

from types import SimpleNamespace

import torch

from harness.child.probes.residual_train import stream_dropouts
from harness.child.probes.train_masks import masked_score_dropouts
from harness.child.probes.train_schedule import _jump, floor_division_line
from harness.child.recorder import Op


def test_an_integer_division_warmup_is_a_flat_stretch_then_one_jump():
    lrs = [1e-3 * min((s + 1) // 400, 1) for s in range(440)]
    j = _jump(lrs)
    assert j["rise"] == 1.0 and j["flat"] == 399 and j["step"] == 400


def test_a_linear_or_stepwise_warmup_rises_gradually():
    assert _jump([1e-3 * min((s + 1) / 400, 1.0) for s in range(440)])["rise"] < 0.003
    stairs = [1e-3 * min((s // 100 + 1) / 4, 1.0) for s in range(440)]     # stepped once per epoch of 100
    assert _jump(stairs)["rise"] == 0.25
    assert _jump([0.0] * 20) is None                                          # no peak: nothing to measure


def test_the_origin_is_the_floor_division_that_names_the_warmup():
    text = ("def train(model, warmup=400):\n"
            "    half = len(model) // 2\n"
            "    f = lambda s: min(s // warmup, 1)\n"
            "    g = lambda s: min(int(s / warmup), 1)\n")
    ctx = SimpleNamespace(source=SimpleNamespace(text=text))
    assert floor_division_line(ctx, 99) == 3
    assert floor_division_line(SimpleNamespace(source=SimpleNamespace(text="x = 1 // 2\n")), 99) == 99


def _op(name, out, line=7):
    return Op(name=name, line=line, outs=[out])


def test_a_dropout_of_the_stream_is_one_of_the_stream_shape_that_is_not_zero():
    stream = torch.randn(2, 6, 64)
    ops = [_op("dropout", torch.zeros(2, 6, 64), 3),              # a silenced sublayer's output: zero
           _op("dropout", torch.rand(2, 4, 6, 6), 4),              # the attention weights: another shape
           _op("dropout", stream, 5)]                              # the stream itself
    assert [op.line for op in stream_dropouts(ops, (2, 6, 64))] == [5]


def test_a_dropout_of_masked_scores_outputs_masked_values_next_to_zeros():
    scores = torch.randn(1, 2, 5, 5)
    masked = scores.masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), -1e9)
    dropped = masked * (torch.rand_like(masked) > 0.3) / 0.7
    weights = torch.softmax(masked, -1) * (torch.rand_like(masked) > 0.3) / 0.7     # dropout after the softmax
    assert [op.line for op in masked_score_dropouts([_op("dropout", weights, 1), _op("dropout", dropped, 2)])] == [2]
