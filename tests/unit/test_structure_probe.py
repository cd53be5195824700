"""Structural properties (issue 29 item 4): a stack's layers are distinct, one attention module does not serve
two roles, the feed-forward is not affine; each failure at the line that builds the list or module, and named
by its cause at >= 0.8. The lesson and a tied embedding/output pass."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness import engine
from harness.child.loader import load, read_source
from harness.child.probes import structure
from harness.child.probes.base import Context

ROOT = Path(__file__).resolve().parents[2]
LESSON = (ROOT / "reference_model" / "reversal.py").read_text()
BLOCK = (ROOT / "reference_model" / "block.py").read_text()


def _run(text, tmp_path, name, assignment="reversal"):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    src = read_source(str(path), path.read_bytes())
    ctx = Context(load(src, module_name=f"st_{name}"), src, assignment)
    checks = (structure.structure if assignment == "reversal" else structure.block_structure)(ctx)
    d = engine.diagnose({"assignment": assignment, "checks": checks, "submission": str(path)})
    return {c["id"]: c for c in checks}, d


def _line_of(text, needle):
    return next(i for i, s in enumerate(text.splitlines(), 1) if needle in s)


def test_the_lesson_passes_and_tying_embedding_and_output_is_fine(tmp_path):
    checks, d = _run(LESSON, tmp_path, "lesson")
    assert [c["status"] for c in checks.values()] == ["pass"] * 3 and d == []
    tied = LESSON.replace("        self.generator = nn.Linear(d_model, vocab)\n",
                          "        self.generator = nn.Linear(d_model, vocab)\n"
                          "        self.generator.weight = self.tgt_emb.weight\n")
    assert tied != LESSON
    checks, d = _run(tied, tmp_path, "tied")
    assert checks["distinct-layers"]["status"] == "pass" and d == []


REPEATED = [("        self.enc = nn.ModuleList(EncoderLayer(d_model, h, d_ff, dropout)\n"
             "                                 for _ in range(num_layers))\n",
             "        self.enc = nn.ModuleList([EncoderLayer(d_model, h, d_ff, dropout)] * num_layers)\n",
             "self.enc = nn.ModuleList([EncoderLayer"),
            ("        self.dec = nn.ModuleList(DecoderLayer(d_model, h, d_ff, dropout)\n"
             "                                 for _ in range(num_layers))\n",
             "        layer = DecoderLayer(d_model, h, d_ff, dropout)\n"
             "        self.dec = nn.ModuleList([layer for _ in range(num_layers)])\n",
             "self.dec = nn.ModuleList([layer")]


@pytest.mark.parametrize("old,new,needle", REPEATED)
def test_one_layer_repeated_in_a_stack_is_named_at_the_list(tmp_path, old, new, needle):
    assert old in LESSON
    text = LESSON.replace(old, new)
    checks, d = _run(text, tmp_path, "repeated")
    assert checks["distinct-layers"]["status"] == "fail"
    assert d[0]["id"] == "layers-shared" and d[0]["confidence"] >= 0.8
    assert abs(d[0]["location"]["line"] - _line_of(text, needle)) <= 1


def test_a_feed_forward_without_nonlinearity_is_named_at_its_construction(tmp_path):
    old = "            nn.Linear(d_model, d_ff), nn.ReLU(),\n"
    assert old in LESSON
    text = LESSON.replace(old, "            nn.Linear(d_model, d_ff),\n")
    checks, d = _run(text, tmp_path, "affine")
    assert checks["ffn-nonlinear"]["status"] == "fail" and checks["ffn-nonlinear"]["measured"] < 1e-5
    assert d[0]["id"] == "feed-forward-linear" and d[0]["confidence"] >= 0.8
    # built in EncoderLayer/DecoderLayer: `self.ff = FeedForward(...)`, or the Sequential inside FeedForward
    lines = {_line_of(text, "self.net = nn.Sequential(")} | {
        i for i, s in enumerate(text.splitlines(), 1) if "self.ff = FeedForward(" in s}
    assert any(abs(d[0]["location"]["line"] - x) <= 1 for x in lines)


def test_one_attention_module_for_self_and_cross_attention_is_named(tmp_path):
    old = "        self.cross_attn = MultiHeadAttention(d_model, h, dropout)\n"
    assert old in LESSON
    text = LESSON.replace(old, "        self.cross_attn = self.self_attn\n")
    checks, d = _run(text, tmp_path, "shared_attn")
    assert checks["distinct-attention"]["status"] == "fail"
    assert d[0]["id"] == "attention-shared" and d[0]["confidence"] >= 0.8
    assert abs(d[0]["location"]["line"] - _line_of(text, "self.self_attn = MultiHeadAttention(")) <= 1


def test_the_block_feed_forward_is_checked_too(tmp_path):
    checks, d = _run(BLOCK, tmp_path, "block", "block")
    assert checks["ffn-nonlinear"]["status"] == "pass" and d == []
