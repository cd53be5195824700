"""missing-embedding-scale needs its mechanism: the embedding reaching the positional encoding unscaled.

GPT-2's N(0, 0.02) embeddings multiplied by sqrt(d_model) are still small against the positional table (the
symptom), but the multiplication is there: no cause. The same init without the multiplication is the cause."""
from __future__ import annotations

from pathlib import Path

from harness import engine
from harness.child.loader import load, read_source
from harness.child.probes import embedding
from harness.child.probes.base import Context

ROOT = Path(__file__).resolve().parents[2]
LESSON = (ROOT / "reference_model" / "reversal.py").read_text()
XAVIER = "                nn.init.xavier_uniform_(p)\n"
GPT2 = "                nn.init.normal_(p, 0.0, 0.02)\n"
SCALED = "self.pos(self.src_emb(src) * math.sqrt(self.d_model))"


def _measure(text: str, tmp_path: Path, name: str):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    src = read_source(str(path), path.read_bytes())
    [c] = embedding.embedding_scale(Context(load(src, module_name=f"emb_{name}"), src, "reversal"))
    d = engine.diagnose({"assignment": "reversal", "checks": [c], "submission": str(path)})
    return c, d


def test_gpt2_init_with_the_sqrt_scale_is_not_accused(tmp_path):
    assert XAVIER in LESSON and SCALED in LESSON
    c, d = _measure(LESSON.replace(XAVIER, GPT2), tmp_path, "gpt2_scaled")
    assert c["data"]["factor"] is not None and abs(c["data"]["factor"] - 8.0) < 0.05
    assert c["status"] == "pass" and d == []


def test_gpt2_init_without_the_scale_is_named_with_its_mechanism(tmp_path):
    text = LESSON.replace(XAVIER, GPT2).replace(SCALED, "self.pos(self.src_emb(src))")
    c, d = _measure(text, tmp_path, "gpt2_unscaled")
    assert c["status"] == "fail" and c["data"]["mechanism"]["kind"] == "no-scale"
    assert d[0]["id"] == "missing-embedding-scale" and d[0]["confidence"] >= 0.8
    line = next(i for i, s in enumerate(text.splitlines(), 1) if "self.pos(self.src_emb(src))" in s)
    assert d[0]["location"]["line"] == line


def test_a_scale_applied_inside_the_positional_encoding_counts(tmp_path):
    text = LESSON.replace(XAVIER, GPT2).replace(SCALED, "self.pos(self.src_emb(src))")
    text = text.replace("self.tgt_emb(tgt) * math.sqrt(self.d_model)", "self.tgt_emb(tgt)")
    assert "        return self.dropout(x + self.pe[:, :x.size(1)])            # (B, T, d)" in text
    text = text.replace("        return self.dropout(x + self.pe[:, :x.size(1)])            # (B, T, d)",
                        "        return self.dropout(x * math.sqrt(x.size(-1)) + self.pe[:, :x.size(1)])")
    c, d = _measure(text, tmp_path, "pe_scales")
    assert c["data"]["pe_gain"] is not None and abs(c["data"]["pe_gain"] - 8.0) < 0.05
    assert c["status"] == "pass" and d == []


def test_a_small_ratio_with_a_scale_of_another_size_stays_below_half():
    c = {"id": "embedding-scale", "status": "fail", "measured": 0.3, "expected": "", "detail": "",
         "data": {"factor": 2.0}, "location": {"file": "f.py", "line": 9}}
    d = engine.diagnose({"assignment": "reversal", "checks": [c], "submission": "f.py"})
    assert [x["id"] for x in d] == ["unexplained-failure"] and d[0]["confidence"] < 0.5
