"""What two runs of the same file must agree on (warm and cold, daemon and cold): the whole result but
time (`timings`, and the milliseconds lm's pictures record)."""
from __future__ import annotations

import json


def comparable(result: dict) -> dict:
    out = json.loads(json.dumps(result))
    out.pop("timings", None)
    for art in (out.get("artifacts") or {}).values():
        if isinstance(art, dict):
            art.pop("ms", None)
    return out
