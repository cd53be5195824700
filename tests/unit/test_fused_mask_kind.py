"""A fused attention call (nn.TransformerDecoderLayer: no weights returned) whose float attn_mask blocks every
earlier key and no later one is an inverted causal mask, not a missing one: the PyTorch tutorial's
generate_square_subsequent_mask without its .transpose(0, 1) was causal-mask-missing at 0.85 before."""
from __future__ import annotations

from pathlib import Path

from harness.child.loader import load, read_source
from harness.child.probes import attention
from harness.child.probes.base import Context

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus" / "reversal"


def _leak(path: Path) -> dict:
    src = read_source(str(path), path.read_bytes())
    [c] = attention.leakage(Context(load(src), src, "reversal", seed=0))
    return c


def test_fused_call_with_the_triangle_the_wrong_way_round_is_inverted():
    path = CORPUS / "bugs" / "tutorial_square_mask_not_transposed.py"
    c = _leak(path)
    assert c["status"] == "fail"
    assert c["data"]["mechanism"]["kind"] == "inverted", c["data"]["mechanism"]
    made = "    mask = (torch.triu(torch.ones((sz, sz), device=device)) == 1)"
    assert c["location"]["line"] == path.read_text().splitlines().index(made) + 1


def test_fused_call_without_a_mask_is_still_missing(tmp_path):
    text = (CORPUS / "correct" / "pytorch_tutorial_style.py").read_text()
    call = "        logits = super().forward(src, tgt, src_mask.float(), tgt_mask, src_key_padding, tgt_padding_mask,\n"
    assert text.count(call) == 1
    p = tmp_path / "no_causal.py"
    p.write_text(text.replace(call, call.replace(" tgt_mask,", " None,")))
    c = _leak(p)
    assert c["status"] == "fail"
    assert c["data"]["mechanism"]["kind"] == "missing", c["data"]["mechanism"]
