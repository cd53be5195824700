"""Short text for the HTML report: numbers rounded, measured values compact, untrusted strings bounded."""
from __future__ import annotations

import math

from ..readable import cut


def as_dict(v: object) -> dict:
    """v when it is a dict, else an empty one: a result's parts are read without trusting their shape."""
    return v if isinstance(v, dict) else {}


def fmt_num(v) -> str:
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}" if abs(v) >= 1000 else str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            return "not a number" if math.isnan(v) else str(v)
        if v == 0:
            return "0"
        if abs(v) >= 1e5 or abs(v) < 1e-3:
            return f"{v:.3g}"
        return f"{v:.4g}"
    return str(v)


def fmt_value(v, limit: int = 300) -> str:
    """A measured value, compact: numbers rounded, dicts as 'key: value', long things cut."""
    if v is None:
        return "—"
    if isinstance(v, (int, float, bool)):
        return fmt_num(v)
    if isinstance(v, dict):
        text = ", ".join(f"{k}: {fmt_value(x, 80)}" for k, x in list(v.items())[:20])
    elif isinstance(v, (list, tuple)):
        text = "[" + ", ".join(fmt_value(x, 40) for x in v[:12]) + (", …" if len(v) > 12 else "") + "]"
    else:
        text = str(v)
    return cut(text, limit)


def measured_lines(v) -> list[str]:
    """A measured value as short lines: one 'key: value' per line for a dict."""
    if isinstance(v, dict) and v:
        lines = [f"{k}: {fmt_value(x, 120)}" for k, x in list(v.items())[:12]]
        return lines + (["…"] if len(v) > 12 else [])
    return [fmt_value(v)]


def trunc(v, limit=4000) -> str:
    """str(v) in at most limit characters, cut at a word's end and marked (harness/readable.py); None is the empty
    string."""
    return cut(v, limit)


def reference_run_text() -> str:
    """The reference's own brief training, as measured (reference_model/brief_training.json), or nothing."""
    from ..checks import value
    from ..reference_curves import load
    ref = load() or {}
    tr = as_dict(ref.get("training"))
    loss = [v for v in tr.get("loss") or [] if isinstance(v, (int, float))]
    if not loss or not isinstance(ref.get("brief_training_loss"), (int, float)):
        return ""
    return (f" (the reference's own run: {loss[0]:.2f} at step 1, {ref['brief_training_loss']:.2f} over the last "
            f"{value('brief-training', 'last')} of {len(loss)} steps with batch {tr.get('batch_size')})")
