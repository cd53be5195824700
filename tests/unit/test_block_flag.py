"""The block's causal flag is measured before any probe assumes it: a block that masks with causal=False is
named causal-flag-ignored at the mask, and the probes that need attention over all tokens skip with the reason
instead of accusing the scaling or the heads."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness import engine
from harness.child.loader import load, read_source
from harness.child.probes import block_attention, block_causal, block_wiring
from harness.child.probes.base import Context, Skip

ROOT = Path(__file__).resolve().parents[2]
BLOCK = (ROOT / "reference_model" / "block.py").read_text()


def _ctx(text, tmp_path, name):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    src = read_source(str(path), path.read_bytes())
    return Context(load(src, module_name=f"flag_{name}"), src, "block")


def test_the_lesson_honours_the_flag(tmp_path):
    [c] = block_causal.causal_off(_ctx(BLOCK, tmp_path, "lesson"))
    assert c["status"] == "pass" and c["measured"] > 1e-3


@pytest.mark.parametrize("old,new", [
    ("        if causal:\n", "        if True:\n"),                     # the flag never read where the mask is
    ("self.attn(x, causal=causal)", "self.attn(x, causal=True)"),      # the flag not passed on
])
def test_a_block_ignoring_causal_false_is_named_as_that(tmp_path, old, new):
    assert old in BLOCK
    text = BLOCK.replace(old, new)
    ctx = _ctx(text, tmp_path, "ignored")
    [c] = block_causal.causal_off(ctx)
    assert c["status"] == "fail" and c["measured"] == 0.0
    with pytest.raises(Skip, match="causal is False"):
        block_attention.saturation(ctx)
    with pytest.raises(Skip, match="causal is False"):
        block_wiring.permutation(ctx)
    d = engine.diagnose({"assignment": "block", "checks": [c], "submission": "f.py"})
    assert d[0]["id"] == "causal-flag-ignored" and d[0]["confidence"] >= 0.8
    bug_line = next(i for i, s in enumerate(text.splitlines(), 1) if new.strip() in s)
    assert abs(d[0]["location"]["line"] - bug_line) <= 1
