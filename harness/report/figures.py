"""The report's pictures, one import for the page: SVG data URIs drawn by svg.py (no matplotlib).

Split by subject: figure_common.py (artifact sanitising, drawing plumbing, Figure, FigureError),
figure_attention.py (cross-attention, causal structure, attention at init), figure_training.py (training
curves, lr trace, overfit) and figure_position.py (the positional table). This module only gathers the names
the HTML report reads (`from . import figures as F`).
"""
from __future__ import annotations

__all__ = ["MAX_HEADS", "MAX_LAYERS", "Figure", "FigureError", "_fmt", "_num", "block_weights", "causal",
           "cross_attention", "expected_cross", "lesson_schedule", "lr_trace", "overfit", "pe", "rowmax", "training",
           "warm_up"]

from .figure_attention import block_weights, causal, cross_attention, expected_cross, rowmax  # noqa: F401
from .figure_common import MAX_HEADS, MAX_LAYERS, Figure, FigureError, warm_up  # noqa: F401
from .figure_common import fmt as _fmt  # noqa: F401   html.py reads the table helpers under these names
from .figure_common import num as _num  # noqa: F401
from .figure_position import pe  # noqa: F401
from .figure_training import lesson_schedule, lr_trace, overfit, training  # noqa: F401
