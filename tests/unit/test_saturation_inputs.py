"""attn-saturation measures the scores' scale through the student's own attention interface (the d2l book's
forward(queries, keys, values, valid_lens) has no default for valid_lens): scaled scores whose rows saturate
because the inputs are large are told (info), not failed; the same file without the division still fails with
the mechanism measured. The d2l-style correct file was missing-sqrt-dk at 0.85 before."""
from __future__ import annotations

from pathlib import Path

from harness.child.loader import load, read_source
from harness.child.probes import attention
from harness.child.probes.base import Context

ROOT = Path(__file__).resolve().parents[2]
D2L = ROOT / "tests" / "corpus" / "reversal" / "correct" / "d2l_style.py"


def _saturation(path: Path) -> dict:
    src = read_source(str(path), path.read_bytes())
    [c] = attention.saturation(Context(load(src), src, "reversal", seed=0))
    return c


def test_scaled_scores_with_large_inputs_are_told_not_failed():
    c = _saturation(D2L)
    assert c["measured"] > 0.62, "the rows do not saturate here: the case is not exercised"
    assert c["data"]["scale"] is not None and c["data"]["scale"]["ratio"] <= 2.0, c["data"]
    assert c["status"] == "info", c


def test_the_same_file_unscaled_fails_with_the_scale_measured(tmp_path):
    text = D2L.read_text()
    scaled = "scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)"
    assert text.count(scaled) == 1
    p = tmp_path / "d2l_unscaled.py"
    p.write_text(text.replace(scaled, "scores = torch.bmm(queries, keys.transpose(1, 2))"))
    c = _saturation(p)
    assert c["status"] == "fail", c
    assert c["data"]["scale"]["ratio"] > 2.0
    assert c["location"]["line"] == text.splitlines().index("        " + scaled) + 1


def _line(path: Path, text: str) -> int:
    return path.read_text().splitlines().index(text) + 1


def test_attention_under_another_interface_is_measured_on_the_whole_model():
    """The annotated transformer's MultiHeadedAttention(h, d_model) and a head per module (no MultiHeadAttention
    taking (64, h) and (q, k, v)): the scale is measured on MiniTransformer(h=16) against (h=1). Unscaled, these
    pre-norm models saturate below the bound (0.61, 0.30), so only the measured scale tells: both were clean."""
    corpus = ROOT / "tests" / "corpus" / "reversal"
    for name, made in (("annotated_attention_unscaled", "    scores = torch.matmul(query, key.transpose(-2, -1))"),
                       ("blog_einsum_unscaled", "        wei = torch.einsum('bqd,bkd->bqk', q, k)       # (B, Tq, Tk)")):
        path = corpus / "bugs" / f"{name}.py"
        c = _saturation(path)
        assert c["status"] == "fail", c
        assert c["data"]["scale"]["measured_on"].startswith("MiniTransformer") and c["data"]["scale"]["ratio"] > 2.0
        assert c["location"]["line"] == _line(path, made)
    for name in ("annotated_style", "scratch_blog_style"):
        c = _saturation(corpus / "correct" / f"{name}.py")
        assert c["status"] == "pass" and c["data"]["scale"]["ratio"] <= 2.0, c
