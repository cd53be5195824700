"""Issue 29's named cases, each a whole check of a corpus file in the sandboxed child (quick): correct styles
come back clean, the bugs are named at their lines. The in-process tests of each mechanism are in tests/unit/
(test_embedding_mechanism, test_on_demand, test_structure_probe, test_pe_layout, test_block_flag,
test_softmax_heads, test_script_run)."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.api import check_file

CORPUS = Path(__file__).resolve().parents[1] / "corpus"

CLEAN = ["reversal/correct/transformer_builtin_float_masks.py",     # nested-tensor fast path, float masks
         "reversal/correct/pe_sin_then_cos_halves.py",              # [sin..., cos...] layout
         "reversal/correct/gpt2_init_sqrt_scale.py",                # N(0, 0.02) with x sqrt(d_model)
         "reversal/correct/notebook_partial_optimizer.ipynb",       # train() uses top-level partials
         "reversal/correct/logging_helper_train.py",                # train() logs through a top-level helper
         "reversal/correct/top_level_raise_info.py",                # fails as a script: info only
         "block/correct/pe_halves_gelu_block.py"]

NAMED = [("reversal/bugs/softmax_over_heads.py", "softmax-wrong-dim", 64),
         ("reversal/bugs/modulelist_repeated_layer.py", "layers-shared", 127),
         ("reversal/bugs/ffn_without_activation.py", "feed-forward-linear", 72),
         ("reversal/bugs/decoder_one_attention.py", "attention-shared", 97),
         ("block/bugs/causal_flag_ignored.py", "causal-flag-ignored", 24),
         ("block/bugs/mlp_two_linears.py", "feed-forward-linear", 45)]


def _check(rel):
    return check_file(CORPUS / rel, assignment=rel.split("/")[0], quick=True)


@pytest.mark.slow
@pytest.mark.parametrize("rel", CLEAN)
def test_correct_styles_come_back_clean(rel):
    r = _check(rel)
    assert r["verdict"] == "clean", [(d["id"], d["confidence"]) for d in r["diagnoses"]]
    assert not any(d["confidence"] >= 0.5 and d.get("severity") != "info" for d in r["diagnoses"])
    if "top_level_raise" in rel:
        assert [d["id"] for d in r["diagnoses"]] == ["script-fails"]
    if rel.endswith(("notebook_partial_optimizer.ipynb", "logging_helper_train.py")):
        assert any(s.get("evaluated_on_demand") for s in r["skipped_code"])


@pytest.mark.slow
@pytest.mark.parametrize("rel,cause,line", NAMED)
def test_bugs_are_named_at_their_lines(rel, cause, line):
    r = _check(rel)
    top = r["diagnoses"][0]
    assert top["id"] == cause and top["confidence"] >= 0.8
    assert abs(top["location"]["line"] - line) <= 1
