"""The report's pictures, shared part: artifact sanitising and the drawing plumbing (svg.py, no matplotlib).

Every drawing function (figure_attention.py, figure_training.py, figure_position.py, lm_figures.py) takes
artifacts exactly as they come out of a result (JSON: lists of numbers that may contain None, may be ragged,
may be huge) and returns a list of Figure records, or raises FigureError with a sentence for the reader. A
figure is an SVG document (text laid out by the browser, heatmaps as embedded PNG) in a data URI: nothing is
kept between figures, so memory does not grow across a batch of reports.

Colours: viridis/cividis for maps, the Okabe-Ito palette for lines, and
every curve also differs by line style, so nothing depends on telling red
from green.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .colormaps import NAMES
from .svg import Canvas, data_uri
from .svg_base import lut

PAD, SOS, EOS = 10, 11, 12
TOKEN_NAMES = {PAD: "PAD", SOS: "<sos>", EOS: "<eos>"}

# Okabe-Ito: distinguishable with every common colour-vision deficiency.
BLUE, ORANGE, SKY, GREEN, VERMILION, GREY = "#0072B2", "#E69F00", "#56B4E9", "#009E73", "#D55E00", "#777777"

MAX_POINTS = 2000        # line plots are subsampled to this many points
MAX_MATRIX = 64          # heatmaps are cropped to this many rows and columns
MAX_HEADS = 8
MAX_LAYERS = 4
MAX_WIDTH_IN = 10.0      # 1000 px at svg_base.DPI: bounded for a laptop screen and for print


class FigureError(Exception):
    """The artifact is present but cannot be drawn; the message is shown to the reader."""


@dataclass
class Figure:
    uri: str             # data:image/svg+xml;base64,...
    alt: str
    caption: str = ""
    width_px: int = 0
    height_px: int = 0


# -- sanitising untrusted artifact data ---------------------------------------------------------------

def num(v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return math.nan
    v = float(v)
    return v if math.isfinite(v) else math.nan


def series(x, limit: int = MAX_POINTS):
    """(steps, values): a list of numbers (None -> nan), 1-based steps, evenly subsampled to `limit` points."""
    if not isinstance(x, (list, tuple)) or not x:
        return None
    n = len(x)
    if n > limit:
        idx = np.unique(np.linspace(0, n - 1, limit).round().astype(int))
    else:
        idx = np.arange(n)
    vals = np.array([num(x[i]) for i in idx], dtype=float)
    if not np.isfinite(vals).any():
        return None
    return idx + 1, vals


def values(x, limit: int = 20000) -> np.ndarray | None:
    """A flat array of the finite numbers in a list (for histograms)."""
    if not isinstance(x, (list, tuple)):
        return None
    step = max(1, len(x) // limit)
    arr = np.array([num(v) for v in x[::step]], dtype=float)
    arr = arr[np.isfinite(arr)]
    return arr if arr.size else None


def matrix(x, max_rows: int = MAX_MATRIX, max_cols: int = MAX_MATRIX) -> np.ndarray | None:
    """A 2-D float array from a list of lists: ragged rows padded with nan, bad entries nan, size bounded."""
    if not isinstance(x, (list, tuple)) or not x:
        return None
    rows = [r if isinstance(r, (list, tuple)) else [] for r in x[:max_rows]]
    width = min(max((len(r) for r in rows), default=0), max_cols)
    if width == 0:
        return None
    out = np.full((len(rows), width), np.nan)
    for i, r in enumerate(rows):
        for j, v in enumerate(r[:width]):
            out[i, j] = num(v)
    if not np.isfinite(out).any():
        return None
    return out


def stack(x, max_items: int, max_rows: int = MAX_MATRIX, max_cols: int = MAX_MATRIX) -> list[np.ndarray | None]:
    """A list of matrices (e.g. [head][T][T]); malformed members become None."""
    if not isinstance(x, (list, tuple)):
        return []
    return [matrix(m, max_rows, max_cols) for m in x[:max_items]]


def token(t) -> str:
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
        return "?"
    t = int(t)
    return TOKEN_NAMES.get(t, str(t))


def tokens(x, limit=MAX_MATRIX) -> list:
    return list(x[:limit]) if isinstance(x, (list, tuple)) else []


# -- drawing plumbing (svg.py) --------------------------------------------------------------------

def new_figure(width: float, height: float) -> Canvas:
    """An empty figure of width x height inches (bounded: 1000 px wide at most, for a laptop screen and print)."""
    return Canvas(min(max(width, 2.0), MAX_WIDTH_IN), min(max(height, 1.5), 12.0))


def to_figure(fig: Canvas, alt: str, caption: str = "") -> Figure:
    """The figure as an SVG data URI."""
    return Figure(data_uri(fig.svg()), alt, caption, fig.w, fig.h)


def warm_up() -> None:
    """Decode the colour tables once (html.prepare calls it while the child runs; nothing else to warm)."""
    for name in NAMES:
        lut(name)


def heat(ax, m, *, cmap="viridis", vmin=0.0, vmax=1.0, xt=None, yt=None, title=None, yticks=True):
    """A matrix on an axes: categorical ticks up to 24 per side (labels xt/yt, else indices; yticks=False: none)."""
    ax.heat(m, cmap=cmap, vmin=vmin, vmax=vmax, xt=xt, yt=yt, yticks=yticks)
    if title:
        ax.title(title)


def fmt(v, nd=2) -> str:
    return "n/a" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.{nd}f}"
