"""docs/mechanisms.md lists, per catalogue cause, the symptom and the mechanism its rule checks; the table and
the rules agree, and every rule that can name a cause at >= 0.8 says which mechanism it confirms."""
from __future__ import annotations

from pathlib import Path

from harness import engine
from harness.causes import RULES

DOC = Path(__file__).resolve().parents[2] / "docs" / "mechanisms.md"


def _rows() -> dict:
    out = {}
    for line in DOC.read_text().splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            out[cells[0].strip("`")] = cells[1:]
    return out


def test_the_table_matches_the_rules():
    rows = _rows()
    causes = [r.CAUSE for r in RULES if r.CAUSE.assignments != ("lm",)]
    assert set(rows) == {c.id for c in causes}
    for c in causes:
        assignments, symptom, mechanism = rows[c.id]
        assert assignments == ", ".join(c.assignments), c.id
        assert symptom == (c.symptom or "-"), c.id
        assert mechanism == c.mechanism and mechanism, f"{c.id}: no mechanism said"


def test_a_symptom_without_its_mechanism_stays_below_half():
    """The symptom checks of the rules that read a mechanism, failed with no mechanism observed."""
    for cid in ("embedding-scale", "distinct-layers", "distinct-attention", "ffn-nonlinear", "causal-leak",
                "residual-train", "causal-leak-train"):
        c = {"id": cid, "status": "fail", "measured": 0.3, "expected": "", "detail": "", "data": {},
             "location": {"file": "f.py", "line": 5}}
        d = engine.diagnose({"assignment": "reversal", "checks": [c], "submission": "f.py"})
        assert d and all(x["confidence"] < 0.5 for x in d), (cid, d)
