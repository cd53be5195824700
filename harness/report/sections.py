"""The report's picture sections, declared once: each a `Section` with its own draw function, registered for
the assignments whose report shows it (names of harness/assignments.py), in the order the report shows them.

A new figure: its drawing function (report/figure_*.py, report/lm_figures.py), one `Section` in `SECTIONS`,
and its introduction under the section's id (report/intro.py `INTRO`; lm's: report/lm_sections.py `INTRO`).
html.py draws the sections of a single-file assignment (an absent one says which probe skipped or failed);
lm_sections.py those with a `component` (an absent one says the component's state in the checklist).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from ..assignments import BLOCK, LM, REVERSAL
from . import figures as F
from . import lm_figures as LF
from .text import as_dict, fmt_num, reference_run_text
from .text import trunc as _str

Figures = list          # what a draw function returns: the section's pictures, in order


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    assignments: tuple[str, ...]                 # whose report has it
    artifacts: tuple[str, ...]                   # the result's artifacts it draws (any present: it is drawn)
    draw: Callable[[dict, dict], Figures]        # (artifacts, result) -> its pictures
    producers: tuple[str, ...] = ()              # probe/check ids whose skip or error says why it is absent
    shows: tuple[str, ...] = ()                  # check ids whose evidence it shows (a diagnosis's "see")
    train_only: bool = False                     # absent from a --quick check
    component: str = ""                          # per-component assignments: whose checklist state explains it
    extra: Callable[[dict, dict], dict] | None = None        # (result, artifacts) -> numbers under the pictures
    note: Callable[[dict, dict], str | None] | None = None   # (result, artifacts) -> a line above them


def checks(result) -> list[dict]:
    return [c for c in result.get("checks") or [] if isinstance(c, dict)]


def by_id(result) -> dict:
    out: dict[object, dict] = {}
    for c in checks(result):
        out.setdefault(c.get("id"), c)
    return out


# ---- the single-file assignments' extras -------------------------------------------------------------------

def _training_note(result: dict, art: dict) -> str | None:
    if not isinstance(art.get("training"), dict):
        return None
    ref = result.get("reference")
    if isinstance(ref, dict) and isinstance(ref.get("training"), dict):
        return None
    return "The reference's curves are not in this result, so yours are shown alone" + reference_run_text() + "."


def _cross_text(result: dict, art: dict) -> dict:
    """The numbers under the cross-attention maps: the pattern check and per-layer, per-head masses."""
    out: dict[str, Any] = {"summary": None, "rows": []}
    c = as_dict(by_id(result).get("cross-attn-pattern"))
    m = c.get("measured")
    if isinstance(m, dict) and isinstance(m.get("anti_diagonal"), (int, float)):
        out["summary"] = {"anti": fmt_num(float(m["anti_diagonal"])),
                          "diag": fmt_num(float(m["diagonal"])) if isinstance(m.get("diagonal"), (int, float)) else "—",
                          "kind": _str(m.get("kind"), 40) or "—", "detail": _str(c.get("detail"), 300),
                          "expected": _str(c.get("expected"), 200)}
    ca = art.get("cross_attention")
    layers = ca.get("layers") if isinstance(ca, dict) else None
    for i, layer in enumerate(layers[:F.MAX_LAYERS] if isinstance(layers, list) else []):
        if not isinstance(layer, dict):
            continue
        anti = [F._num(a) for a in layer.get("anti") or []][:F.MAX_HEADS] if isinstance(layer.get("anti"), list) else []
        diag = [F._num(a) for a in layer.get("diag") or []][:F.MAX_HEADS] if isinstance(layer.get("diag"), list) else []
        fin = [a for a in anti if math.isfinite(a)]
        out["rows"].append({"layer": i + 1, "anti": [F._fmt(a) for a in anti], "diag": [F._fmt(d) for d in diag],
                            "mean": F._fmt(sum(fin) / len(fin)) if fin else "n/a"})
    if out["summary"] is None and out["rows"]:
        best = max(out["rows"], key=lambda r: float(r["mean"]) if r["mean"] != "n/a" else -1)
        out["summary"] = {"anti": best["mean"], "diag": "—", "kind": "—",
                          "detail": f"layer {best['layer']}, mean over heads", "expected": ""}
    return out


def _reference_training(result: dict):
    ref = as_dict(result.get("reference"))
    return ref.get("training") if isinstance(ref.get("training"), dict) else None


R, B, RB, L = (REVERSAL.name,), (BLOCK.name,), (REVERSAL.name, BLOCK.name), (LM.name,)

SECTIONS: tuple[Section, ...] = (
    Section("cross-attention", "Cross-attention after brief training", R, ("cross_attention",),
            lambda art, result: F.cross_attention(art["cross_attention"]),
            producers=("cross-attn-pattern", "brief-training"), shows=("cross-attn-pattern", "decode-accuracy"),
            train_only=True, extra=_cross_text),
    Section("training", "Training curves", R, ("training",),
            lambda art, result: [F.training(art["training"], _reference_training(result))],
            producers=("brief-training",), shows=("brief-training",), train_only=True, note=_training_note),
    Section("lr-schedule", "Learning-rate schedule of your train()", R, ("trace",),
            lambda art, result: [F.lr_trace(art["trace"])], producers=("lr-schedule", "train-trace"),
            shows=("lr-schedule",)),
    Section("positional", "Positional encoding", RB, ("pe_table",),
            lambda art, result: [F.pe(art["pe_table"], art.get("pe_diff"))], producers=("pe-formula", "pe"),
            shows=("pe-formula",)),
    Section("causal", "Causal structure", RB, ("dependency", "target_mask"),
            lambda art, result: [F.causal(art.get("dependency"), art.get("target_mask"))],
            producers=("causal-leak", "target-mask"), shows=("causal-leak",)),
    Section("rowmax", "Attention at initialisation", RB, ("attn_rowmax_init",),
            lambda art, result: [F.rowmax(art["attn_rowmax_init"])], producers=("attn-saturation",),
            shows=("attn-saturation",)),
    Section("overfit", "Overfitting one batch", R, ("overfit",), lambda art, result: [F.overfit(art["overfit"])],
            producers=("overfit",), shows=("overfit",)),
    Section("block-weights", "Self-attention of your TransformerBlock", B, ("block_weights",),
            lambda art, result: [F.block_weights(art["block_weights"])], producers=("block-weights", "block-causal"),
            shows=("block-weights", "block-causal", "block-saturation", "block-rows-sum")),
    # lm: after the component checklist
    Section("lm-rope", "RoPE: scores against the relative position", L, ("lm_rope_scores",),
            lambda art, result: [LF.rope_relative(art["lm_rope_scores"])], component="rope",
            shows=("lm-rope-relative", "lm-rope-identity-at-0", "lm-rope-norm", "lm-rope")),
    Section("lm-causal", "Causal structure of your language model", L, ("lm_dependency",),
            lambda art, result: [LF.lm_causal(art["lm_dependency"])], component="lm", shows=("lm-lm-causal",)),
    Section("lm-schedule", "Learning-rate schedule", L, ("lm_lr_schedule",),
            lambda art, result: [LF.lr_schedule(art["lm_lr_schedule"])], component="lr-schedule",
            shows=("lm-lr-schedule",)),
    Section("lm-training", "Brief training: your loss beside the reference's", L, ("lm_training",),
            lambda art, result: [LF.training_curve(art["lm_training"])], component="lm", shows=("lm-training",)),
)
# the parameter table is not a picture, but its absence is explained the same way
PARAMETERS = Section("parameters", "Parameter count", (), (), lambda art, result: [], producers=("param-count",),
                     shows=("param-count",))

PICTURES = tuple(s for s in SECTIONS if not s.component)       # html.py draws these
COMPONENT_PICTURES = tuple(s for s in SECTIONS if s.component)  # lm_sections.py draws these
CHECK_SECTION = {cid: s.id for s in SECTIONS + (PARAMETERS,) for cid in s.shows}
TITLES = {s.id: s.title for s in SECTIONS + (PARAMETERS,)}
