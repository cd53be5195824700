"""decode-encoder-calls counts source sequences by their length, not by the first axis: a sequence-first
greedy_decode (the PyTorch tutorial's (S, B) tensors) that encodes once was a failure at 0.9 before."""
from __future__ import annotations

from pathlib import Path

from harness.child.loader import load, read_source
from harness.child.probes import decoding
from harness.child.probes.base import Context

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "tests" / "corpus" / "reversal" / "correct" / "pytorch_tutorial_style.py"


def _encoder_check(path: Path) -> dict:
    src = read_source(str(path), path.read_bytes())
    checks = decoding.encoder_calls(Context(load(src), src, "reversal", seed=0))
    return next(c for c in checks if c["id"] == "decode-encoder-calls")


def test_sequence_first_decode_that_encodes_once_passes():
    c = _encoder_check(TUTORIAL)
    assert c["status"] == "pass", c
    assert c["measured"] == 1


def test_sequence_first_decode_that_encodes_every_step_fails(tmp_path):
    text = TUTORIAL.read_text()
    once = "    memory = model.encode(src, src_mask, src_padding)\n"
    assert text.count(once) == 1
    loop = "        tgt_mask = generate_square_subsequent_mask(ys.size(0), src.device)\n"
    assert text.count(loop) == 1
    p = tmp_path / "encode_in_loop.py"
    p.write_text(text.replace(once, "").replace(loop, loop + "    " + once))
    c = _encoder_check(p)
    assert c["status"] == "fail", c
    assert c["measured"] > 1
