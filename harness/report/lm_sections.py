"""The `lm` report's picture sections (after the component checklist), in the shape html.py's template draws.

    sections(result, timings, trunc) -> [{id, title, intro, figures, absent, error, note, extra}]

A picture whose artifact is missing says why in one line: the probe's own note ({"skipped": ...}, e.g. the adapter
raised), else the component's state in the checklist (not implemented, raised, not run).
"""
from __future__ import annotations

import time
from typing import Any

from ..assignments import assignment_of
from .figure_common import FigureError
from .lm_checklist import rows
from .sections import COMPONENT_PICTURES
from .text import as_dict

# the sections (id, title, artifact, component, draw function): report/sections.py
SECTIONS = COMPONENT_PICTURES

INTRO = {
    "lm-rope": "One fixed query q and key k, both rotated by your run_rope at 32 shuffled positions (d_k 16, "
               "theta 10000); every dot is q_m . k_n for one pair of positions, drawn at its offset m - n. RoPE "
               "exists so that this score depends only on m - n: every column of dots must collapse to one dot, "
               "on the reference's curve (the line).",
    "lm-causal": "Your run_transformer_lm (2 layers, d_model 32, random weights) on 8 tokens; each column changes "
                 "one input token j and colours how far every output position i moves. Correct is "
                 "lower-triangular: output i depends on tokens 0..i only. A cell above the diagonal is a future "
                 "leak: training looks excellent and generation fails.",
    "lm-schedule": "Your run_get_lr_cosine_schedule at every iteration of one setting (max 1, min 0.1, warmup 7, "
                   "cosine cycle to 21, then 5 more), against the reference: a linear warmup, a cosine down to the "
                   "minimum, then flat at the minimum.",
    "lm-training": "Your TransformerLM (2 layers, d_model 16) trained with your AdamW, cross-entropy, gradient "
                   "clipping and cosine schedule on the batches your run_get_batch draws from a 1,018-character "
                   "corpus, beside the reference's pieces on the same batches from the same weights; and 25 steps "
                   "on one batch. Correct code follows the reference's curve to float32 rounding (1e-5 relative). "
                   "A full check only.",
}



def absent(result: dict, art, comp: str, adapter_rows: dict, trunc) -> str:
    """One sentence: why this picture is not drawn."""
    if isinstance(art, dict) and art.get("skipped"):
        return f"Not drawn: {trunc(art['skipped'], 300)}."
    err = result.get("error")
    if isinstance(err, dict) and (err.get("kind") or err.get("reason")):
        return f"Not drawn: the check stopped early ({trunc(err.get('reason') or err.get('kind'), 300)})."
    r = adapter_rows.get(comp) or {}          # a row of lm_checklist.rows: state and adapter always set
    state, name = r.get("state", "not run"), r.get("adapter", comp)
    if state == "not implemented":
        return f"Not drawn: {name} is not implemented yet (it raises NotImplementedError)."
    if state == "not defined":
        return f"Not drawn: {name} is not defined."
    if state == "error":
        return f"Not drawn: {name} raised an error ({trunc(r.get('note'), 200)}); see the component checklist."
    if state == "not run":
        return "Not drawn: the probes did not run on this submission (see the diagnoses above)."
    return "Not drawn: the probe recorded no data for this picture."


def sections(result: dict, timings: dict, trunc) -> list[dict]:
    assignment = result.get("assignment")
    if not assignment_of(assignment).per_component:
        return []
    arts = as_dict(result.get("artifacts"))
    adapter_rows = {r["component"]: r for r in rows(result)}
    out = []
    for sec in SECTIONS:
        if assignment not in sec.assignments:
            continue
        art = arts.get(sec.artifacts[0])
        entry: dict[str, Any] = {"id": sec.id, "title": sec.title, "intro": INTRO[sec.id], "figures": [],
                                 "absent": None, "error": None, "note": None, "extra": None}
        if art is None or (isinstance(art, dict) and art.get("skipped")):
            entry["absent"] = absent(result, art, sec.component, adapter_rows, trunc)
        else:
            t = time.perf_counter()
            try:
                entry["figures"] = sec.draw(arts, result)
            except FigureError as e:
                entry["error"] = f"This picture could not be drawn: {e}."
            except Exception as e:  # a bug here must not cost the student the rest of the report
                entry["error"] = f"This picture could not be drawn ({type(e).__name__}: {trunc(e, 200)})."
            timings[f"figure:{sec.id}"] = round(time.perf_counter() - t, 4)
        out.append(entry)
    return out
