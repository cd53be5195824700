"""Record the reference model's brief training, so every report can draw the student's curve beside it.

    python bench/record_reference_curves.py      # rewrites reference_model/brief_training.json

It runs the reference through exactly the path `check` uses (same probe, steps, batch and seed 0) and
keeps the loss, learning rate and gradient norm per step and the end-of-training numbers. The report
draws these against the student's run; rerun this after changing the brief-training probe.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness.api import check_file  # noqa: E402
from harness.assignments import REVERSAL  # noqa: E402
from harness.reference_curves import PATH, ROOT  # noqa: E402
from harness.runner import Limits  # noqa: E402


def main():
    r = check_file(ROOT / "reference_model" / REVERSAL.reference, assignment=REVERSAL.name, quick=False, seed=0,
                   limits=Limits(timeout_s=1800))
    art = r["artifacts"].get("training")
    if r["verdict"] != "clean" or not art:
        raise SystemExit(f"the reference did not come back clean with training artifacts: {r['diagnoses']}")
    checks = {c["id"]: c["measured"] for c in r["checks"]}
    data = {"seed": 0, "training": art, "decode_accuracy": checks.get("decode-accuracy"),
            "cross_attn_pattern": checks.get("cross-attn-pattern"), "brief_training_loss": checks.get("brief-training")}
    PATH.write_text(json.dumps(data, indent=0))
    print(f"wrote {PATH}: accuracy {data['decode_accuracy']}, cross-attention {data['cross_attn_pattern']}")


if __name__ == "__main__":
    main()
