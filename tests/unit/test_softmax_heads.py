"""nn.Softmax(dim=1) on (B, h, T_q, T_k) scores normalises over the heads: the weights that multiply V are
distributions over an axis that is neither the keys nor the queries. Named softmax-wrong-dim at its line, and
the mask causes that read the weights as distributions over keys stay silent."""
from __future__ import annotations

from pathlib import Path

from harness import engine
from harness.child.loader import load, read_source
from harness.child.probes import attention
from harness.child.probes.base import Context

ROOT = Path(__file__).resolve().parents[2]
LESSON = (ROOT / "reference_model" / "reversal.py").read_text()


def test_softmax_over_the_heads_is_the_wrong_dim_at_its_line(tmp_path):
    init = "        self.dropout = nn.Dropout(dropout)\n\n    def _split"
    call = "        attn = self.dropout(torch.softmax(scores, dim=-1))         # normalise over keys\n"
    assert init in LESSON and call in LESSON
    text = LESSON.replace(init, "        self.dropout = nn.Dropout(dropout)\n        self.norm_w = nn.Softmax(dim=1)"
                                "\n\n    def _split")
    text = text.replace(call, "        attn = self.dropout(self.norm_w(scores))\n")
    path = tmp_path / "heads.py"
    path.write_text(text)
    src = read_source(str(path), path.read_bytes())
    [c] = attention.softmax_axis(Context(load(src, module_name="sm_heads"), src, "reversal"))
    assert c["status"] == "fail" and c["data"]["key_axis"]["over_other_err"] < 1e-4
    leak = {"id": "causal-leak", "status": "fail", "measured": 0.3, "expected": "", "detail": "", "location": None,
            "data": {"mechanism": {"kind": "missing", "text": "weights on later keys"}}}
    d = engine.diagnose({"assignment": "reversal", "checks": [c, leak], "submission": str(path)})
    assert d[0]["id"] == "softmax-wrong-dim" and d[0]["confidence"] >= 0.8
    assert "causal-mask-missing" not in [x["id"] for x in d]
    assert d[0]["location"]["line"] == next(i for i, s in enumerate(text.splitlines(), 1) if "self.norm_w(scores)" in s)
