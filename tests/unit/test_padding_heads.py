"""A padding mask that reaches some heads of a sample and not the others (its rows tiled in another (sample,
head) order than the scores'): measured per head, located at the fill, still `missing` for the rule."""
from __future__ import annotations

import torch

from harness.child.probes import mechanism
from harness.child.probes.padding import _pad_mechanism


def test_pad_share_is_measured_per_head():
    B, h, T, n_real = 2, 4, 3, 2
    w = torch.full((B * h, T, T), 1 / 3, dtype=torch.float64)
    w[[0, 2], :, :n_real] = 0.5          # heads 0 and 2 of sample 0: PAD key (index 2) masked
    w[[0, 2], :, n_real:] = 0.0
    pad, real, per_head = mechanism._pad_share(w, T, T, n_real, n_real, B)
    assert per_head == [0.0, 1 / 3, 0.0, 1 / 3]
    assert abs(pad - 1 / 6) < 1e-12 and abs(real - (2 * 1 + 2 * 2 / 3) / 4) < 1e-12


def test_some_heads_masked_is_a_misaligned_mask_at_its_fill():
    worst = {"line": 90, "pad": 0.25, "real": 0.75, "heads": 4, "heads_masked": 2, "fill_line": 81}
    m = _pad_mechanism(worst)
    assert m["kind"] == "missing" and m["misaligned"] and "line 81" in m["text"]
    # no head masked: the plain missing mask; every head masked: no PAD weight at all
    assert not _pad_mechanism(dict(worst, heads_masked=0)).get("misaligned")
    assert _pad_mechanism(dict(worst, pad=0.0, heads_masked=4))["kind"] == "elsewhere"
    # no fill seen: nothing to point at, the plain reading
    assert not _pad_mechanism(dict(worst, fill_line=None)).get("misaligned")
