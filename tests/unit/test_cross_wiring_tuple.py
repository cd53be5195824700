"""cross-attn-wiring finds the encoder output when encode() returns it with the source's padding, (memory, pad),
as minGPT-style and from-scratch encoders do: the from-scratch corpus file (one Linear per head in a ModuleList)
was source-ignored at 0.75 before. A decoder that gives its cross-attention the decoder stream still fails."""
from __future__ import annotations

from pathlib import Path

from harness.child.loader import load, read_source
from harness.child.probes import model_wiring
from harness.child.probes.base import Context

ROOT = Path(__file__).resolve().parents[2]
BLOG = ROOT / "tests" / "corpus" / "reversal" / "correct" / "scratch_blog_style.py"


def _wiring(path: Path) -> dict:
    src = read_source(str(path), path.read_bytes())
    checks = model_wiring.cross_wiring(Context(load(src), src, "reversal", seed=0))
    return next(c for c in checks if c["id"] == "cross-attn-wiring")


def test_memory_returned_with_its_padding_is_found():
    c = _wiring(BLOG)
    assert c["status"] == "pass", c
    assert c["measured"]["memory_as_key_value"] >= 2


def test_cross_attention_fed_the_decoder_stream_fails(tmp_path):
    text = BLOG.read_text()
    wired = "        x = x + self.ca(self.ln2(x), memory, key_pad=src_pad)\n"
    assert text.count(wired) == 1
    p = tmp_path / "blog_no_memory.py"
    p.write_text(text.replace(wired, "        x = x + self.ca(self.ln2(x), key_pad=None)\n"))
    c = _wiring(p)
    assert c["status"] == "fail", c
    assert c["measured"]["memory_as_key_value"] == 0
