"""A positional table is judged by what makes it work, not by one channel order: the lesson's sin/cos channels
laid out as [sin..., cos...] (fairseq's order) are clean; a table with other frequencies is not."""
from __future__ import annotations

from pathlib import Path

from harness import engine
from harness.child.loader import load, read_source
from harness.child.probes import positional
from harness.child.probes.base import Context

ROOT = Path(__file__).resolve().parents[2]
LESSON = (ROOT / "reference_model" / "reversal.py").read_text()
BLOCK = (ROOT / "reference_model" / "block.py").read_text()
PAIRS = ("        pe[:, 0::2] = torch.sin(pos * div)\n        pe[:, 1::2] = torch.cos(pos * div)\n")
HALVES = ("        half = div.numel()\n        pe[:, :half] = torch.sin(pos * div)\n"
          "        pe[:, half:] = torch.cos(pos * div)\n")


def _checks(text, tmp_path, name, assignment, probe):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    src = read_source(str(path), path.read_bytes())
    checks = probe(Context(load(src, module_name=f"pe_{name}"), src, assignment))
    return {c["id"]: c for c in checks}, engine.diagnose({"assignment": assignment, "checks": checks,
                                                          "submission": str(path)})


def test_sin_then_cos_halves_are_a_layout_not_a_formula_bug(tmp_path):
    assert PAIRS in LESSON
    checks, d = _checks(LESSON.replace(PAIRS, HALVES), tmp_path, "halves", "reversal", positional.table)
    assert checks["pe-formula"]["status"] == "pass" and "layout" in checks["pe-formula"]["detail"] and d == []


def test_other_frequencies_are_still_the_formula_bug(tmp_path):
    text = LESSON.replace("torch.arange(0, d_model, 2).float()", "torch.arange(0, d_model // 2).float()")
    checks, d = _checks(text.replace(PAIRS, HALVES), tmp_path, "freq", "reversal", positional.table)
    assert checks["pe-formula"]["status"] == "fail" and d[0]["id"] == "positional-encoding-formula"


def test_block_relative_offsets_hold_in_another_layout(tmp_path):
    old_sin = next(s for s in BLOCK.splitlines() if "0::2]" in s and "sin" in s)
    old_cos = next(s for s in BLOCK.splitlines() if "1::2]" in s and "cos" in s)
    half = "d_model // 2"
    text = BLOCK.replace(old_sin, old_sin.replace("0::2]", f":{half}]")).replace(
        old_cos, old_cos.replace("1::2]", f"{half}:]"))
    assert text != BLOCK
    checks, d = _checks(text, tmp_path, "block_halves", "block", positional.pe_relative)
    assert checks["pe-relative"]["status"] == "pass"
