"""The reference model's brief training, committed in reference_model/brief_training.json: every report draws
the student's curve beside it. Only the loader lives here (the engine reads it); the script that regenerates
the file is bench/record_reference_curves.py (it runs a check, so it imports the API: keeping it apart keeps
api -> engine -> reference_curves free of a circle).
"""
from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATH = ROOT / "reference_model" / "brief_training.json"


def load() -> dict | None:
    try:
        return json.loads(PATH.read_text())
    except (OSError, ValueError):
        return None
