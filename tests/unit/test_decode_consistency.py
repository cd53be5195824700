"""decode-consistency compares greedy_decode's tokens with the forward pass's up to each row's EOS: a loop that
fills finished rows with PAD is correct (it was a false alarm on correct code before)."""
from __future__ import annotations

from pathlib import Path

import torch

from harness.child.loader import load, read_source
from harness.child.probes import properties
from harness.child.probes.base import Context
from harness.child.probes.common import EOS, PAD, batch, eval_model, kwargs_for

ROOT = Path(__file__).resolve().parents[2]


def _ctx(path: Path, seed: int) -> Context:
    src = read_source(str(path), path.read_bytes())
    return Context(load(src), src, "reversal", seed=seed)


def test_rows_padded_after_their_eos_are_not_a_disagreement():
    ctx = _ctx(ROOT / "tests" / "fixtures" / "correct" / "reversal_fused_einsum.py", seed=1)   # pads with PAD
    decode = ctx.need("greedy_decode")
    src, _ = batch(ctx, 8, 12, 12, seed_offset=45)             # the probe's 8 sources
    with torch.no_grad():
        ys = decode(eval_model(ctx), src, **kwargs_for(decode, max_len=10))[0]
    ended_early = [(row == EOS).nonzero()[0].item() for row in ys if EOS in row.tolist()]
    assert ended_early and min(ended_early) < ys.size(1) - 1, "no row ends early here: the case is not exercised"
    [c] = properties.decode_consistency(ctx)
    assert c["status"] == "pass", c
    assert c["data"]["first_token_differs"] is None


def test_a_decode_that_picks_another_token_before_eos_still_fails(tmp_path):
    lesson = (ROOT / "submissions" / "reversal_lesson.py").read_text()
    assert lesson.count(".argmax(-1") >= 1
    p = tmp_path / "argmin.py"                                      # the least likely token, every step
    p.write_text(lesson.replace("argmax(-1", "argmin(-1"))
    [c] = properties.decode_consistency(_ctx(p, seed=0))
    assert c["status"] == "fail" and c["data"]["first_token_differs"] == 1


def test_a_predicted_pad_is_where_comparison_stops():
    """The annotated transformer's greedy_decode builds only the causal mask for its prefix; its forward pass also
    hides PAD keys. An untrained model predicts PAD (seed 0: before any EOS), and from there the two rightly see
    different keys: a correct file (it was a failure at 0.45)."""
    ctx = _ctx(ROOT / "tests" / "corpus" / "reversal" / "correct" / "annotated_style.py", seed=0)
    decode = ctx.need("greedy_decode")
    src, _ = batch(ctx, 8, 12, 12, seed_offset=45)
    with torch.no_grad():
        ys = decode(eval_model(ctx), src, **kwargs_for(decode, max_len=10))[0]
    pad_before_eos = [row.tolist().index(PAD) for row in ys
                      if PAD in row.tolist() and (EOS not in row.tolist() or row.tolist().index(PAD) < row.tolist().index(EOS))]
    assert pad_before_eos, "no PAD predicted before EOS here: the case is not exercised"
    [c] = properties.decode_consistency(ctx)
    assert c["status"] == "pass", c
