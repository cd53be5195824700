"""One root cause, one diagnosis, for a pack too: a pack diagnosis every check of which a stronger diagnosis already
explains is folded into it (engine.diagnose). The heads merged by a plain reshape make the mask probes see pairs
leak; heads-merged-wrong explains them, so attention-mask-misapplied (0.7) is not named beside it."""
from __future__ import annotations

from harness import engine
from harness.packs.cs231n.mutants import MUTANTS
from harness.packs.cs231n.pack import PACK
from test_role_probes import KEY, _checks, _load


def test_the_heads_merged_wrong_mutant_is_one_diagnosis(tmp_path):
    m = next(m for m in MUTANTS if m.id == "cs231n-heads-merged-wrong")
    text = m.source()
    checks = _checks(_load(tmp_path, text), text, {"MultiHeadAttention"})
    failed = {c["id"] for c in checks if c["status"] == "fail"}
    assert {"MultiHeadAttention.mask-float", "MultiHeadAttention.reference"} <= failed     # the symptom is there
    ids = [d["id"] for d in engine.diagnose({"assignment": PACK.name, "checks": checks, "submission": KEY})]
    assert ids == ["heads-merged-wrong"], ids
    alone = [c for c in checks if c["id"] != "MultiHeadAttention.reference"]              # without the root cause
    ids = [d["id"] for d in engine.diagnose({"assignment": PACK.name, "checks": alone, "submission": KEY})]
    assert "attention-mask-misapplied" in ids, ids
