"""The reference model's brief training, committed in reference_model/brief_training.json: every report draws
the student's curve beside it. Only the loader lives here (the engine reads it); the script that regenerates
the file is bench/record_reference_curves.py (it runs a check, so it imports the API: keeping it apart keeps
api -> engine -> reference_curves free of a circle).

The parent alone reads the file: the child measures the student's model and says what it expects without the
reference's numbers, and `fill_expected` adds them to the checks that compare with them (the sandbox's snapshot
of the harness holds no data file but the child's own, harness/isolation/sandbox.CHILD_DATA).
"""
from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATH = ROOT / "reference_model" / "brief_training.json"

# check id -> (the file's key, the key inside it or None, the expectation with the reference's number)
EXPECTED = {
    "decode-accuracy": ("decode_accuracy", None, "reference after the same training: {}"),
    "cross-attn-pattern": ("cross_attn_pattern", "anti_diagonal",
                           "anti-diagonal (reference after the same training: {} of the mass)"),
}


def load() -> dict | None:
    try:
        data = json.loads(PATH.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def number(ref: dict | None, check_id: str) -> float | None:
    """The reference's measured value for a check of its brief training, or None (no file, no such number)."""
    key, inner, _ = EXPECTED[check_id]
    v = (ref or {}).get(key)
    if inner is not None:
        v = v.get(inner) if isinstance(v, dict) else None
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def fill_expected(checks: list[dict], ref: dict | None) -> None:
    """The reference's numbers (`ref`: what load() read) in the expectations of the checks that compare with them,
    in place. A check is left as the child wrote it when the file, or its number, is missing: never a 'None'."""
    for c in checks:
        if c.get("id") not in EXPECTED or c.get("status") == "skip":
            continue
        v = number(ref, c["id"])
        if v is not None:
            c["expected"] = EXPECTED[c["id"]][2].format(f"{v:g}")
