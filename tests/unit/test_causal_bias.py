"""Issue 48 item 4: a causal relative bias built symmetric (an ALiBi with abs()) in a causal block, on the recorded
goldens of the corpus's ALiBi files and the block mutant: the cause, its line (the statement that builds the bias,
not the softmax), its evidence, and the correct counterparts (the one-sided bias; a symmetric bias next to the
causal mask) clean. The child's measurement is recorded; these replay it through the parent's rules."""
from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

import pytest

from harness import engine

ROOT = Path(__file__).resolve().parents[2]
GOLDENS = Path(__file__).resolve().parent / "goldens"
_spec = importlib.util.spec_from_file_location("record_goldens_bias", ROOT / "bench" / "record_goldens.py")
recorder = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(recorder)

BUG = "corpus/block/bugs/alibi_symmetric_bias.py"
MUTANT = "block-causal-bias-symmetric"
CORRECT = ("corpus/block/correct/alibi_causal_bias.py", "corpus/block/correct/distance_bias_with_mask.py")


def _golden(case: str) -> dict:
    return json.loads((GOLDENS / recorder.file_name(case)).read_text())


def _replayed(case: str) -> dict:
    return recorder.replay(_golden(case))


def _bug_line() -> int:
    manifest = json.loads((ROOT / "tests" / "corpus" / "block" / "manifest.json").read_text())
    [entry] = [e for e in manifest["entries"] if e["file"] == "bugs/alibi_symmetric_bias.py"]
    [line] = entry["lines"]
    return line


def _line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


def test_the_corpus_twin_is_named_at_the_statement_that_builds_the_bias():
    r = _replayed(BUG)
    top = r["diagnoses"][0]
    assert top["id"] == "causal-bias-symmetric" and top["confidence"] >= 0.8
    line = _bug_line()
    text = (ROOT / "tests" / "corpus" / "block" / "bugs" / "alibi_symmetric_bias.py").read_text()
    assert ".abs()" in text.splitlines()[line - 1]          # the manifest's line is the abs() statement
    assert top["location"]["line"] == line
    assert "causal-mask-missing" not in {d["id"] for d in r["diagnoses"]}
    c = next(c for c in r["checks"] if c["id"] == "block-causal")
    bias = c["data"]["bias"]
    # the mechanism: the table is finite ahead and mirrors itself, it joins the scores after it is made, and
    # the later keys get weight
    assert bias["future_finite"] and bias["mirror_error"] == 0.0 and bias["line"] == line
    assert bias["joins_line"] > line and bias["future_weight_mean"] > 0.05 and bias["future_weight_max"] < 1.0
    assert any("of a row's weight" in e for e in top["evidence"])


def test_the_mutant_is_named_at_its_abs_line():
    from mutants import get, source
    r = _replayed(MUTANT)
    top = r["diagnoses"][0]
    assert top["id"] == "causal-bias-symmetric" and top["confidence"] >= 0.8
    assert top["location"]["line"] == _line_of(source(get(MUTANT)), ".abs()")


@pytest.mark.parametrize("case", CORRECT)
def test_the_correct_counterparts_are_clean(case):
    r = _replayed(case)
    assert r["verdict"] == "clean" and r["diagnoses"] == []
    c = next(c for c in r["checks"] if c["id"] == "block-causal")
    assert c["status"] == "pass" and c["data"]["kind"] == "ok"


def test_unseen_where_it_joins_the_scores_it_is_not_asserted():
    """The table alone (its use in the scores not seen) names the cause below 0.8; without the table's
    measurement the kind names nothing (the plain missing mask is another kind)."""
    r = _golden(BUG)
    checks = copy.deepcopy(r["payload"]["checks"])
    c = next(c for c in checks if c["id"] == "block-causal")
    c["data"]["bias"]["joins_line"] = None
    d = engine.diagnose({"assignment": "block", "checks": checks, "submission": "f.py"})
    assert d[0]["id"] == "causal-bias-symmetric" and d[0]["confidence"] < 0.8
    c["data"]["bias"] = None
    d = engine.diagnose({"assignment": "block", "checks": checks, "submission": "f.py"})
    assert "causal-bias-symmetric" not in {x["id"] for x in d}
