"""The report's pictures, shared part: artifact sanitising and matplotlib plumbing (Agg, no pyplot state).

Every drawing function (figure_attention.py, figure_training.py, figure_position.py) takes artifacts
exactly as they come out of a result (JSON: lists of numbers that may contain None, may be ragged, may be
huge) and returns a list of Figure records, or raises FigureError with a sentence for the reader. Nothing
here touches pyplot's global figure list: each figure is a bare matplotlib.figure.Figure with its own Agg
canvas, dropped (and closed, when pyplot happens to know it) as soon as its PNG is written, so memory does
not grow across a batch of reports.

Colours: viridis/cividis for maps, the Okabe-Ito palette for lines, and
every curve also differs by line style, so nothing depends on telling red
from green.
"""
from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass

import numpy as np

PAD, SOS, EOS = 10, 11, 12
TOKEN_NAMES = {PAD: "PAD", SOS: "<sos>", EOS: "<eos>"}

# Okabe-Ito: distinguishable with every common colour-vision deficiency.
BLUE, ORANGE, SKY, GREEN, VERMILION, GREY = "#0072B2", "#E69F00", "#56B4E9", "#009E73", "#D55E00", "#777777"

MAX_POINTS = 2000        # line plots are subsampled to this many points
MAX_MATRIX = 64          # heatmaps are cropped to this many rows and columns
MAX_HEADS = 8
MAX_LAYERS = 4
DPI = 100
MAX_WIDTH_IN = 10.0      # 1000 px at DPI: bounded for a laptop screen and for print


class FigureError(Exception):
    """The artifact is present but cannot be drawn; the message is shown to the reader."""


@dataclass
class Figure:
    uri: str             # data:image/png;base64,...
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


# -- matplotlib plumbing --------------------------------------------------------------------------

_MPL = {}


def _mpl():
    """matplotlib's object API with the Agg canvas; imported once, never via pyplot's state."""
    if not _MPL:
        import matplotlib
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure as MplFigure
        _MPL.update(matplotlib=matplotlib, Canvas=FigureCanvasAgg, Figure=MplFigure)
    return _MPL


RC = {"font.size": 8.5, "axes.titlesize": 9, "axes.labelsize": 8.5, "xtick.labelsize": 7.5,
      "ytick.labelsize": 7.5, "legend.fontsize": 7.5, "axes.spines.top": False, "axes.spines.right": False,
      "figure.facecolor": "white", "axes.facecolor": "white", "savefig.facecolor": "white"}


def new_figure(width: float, height: float):
    m = _mpl()
    width = min(max(width, 2.0), MAX_WIDTH_IN)
    height = min(max(height, 1.5), 12.0)
    with m["matplotlib"].rc_context(RC):
        fig = m["Figure"](figsize=(width, height), dpi=DPI)
    m["Canvas"](fig)
    return fig


def to_figure(fig, alt: str, caption: str = "") -> Figure:
    """PNG bytes -> data URI; the figure is closed and cleared whatever happens."""
    m = _mpl()
    try:
        buf = io.BytesIO()
        with m["matplotlib"].rc_context(RC):
            fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
        w, h = (int(round(v * DPI)) for v in fig.get_size_inches())
        data = base64.b64encode(buf.getvalue()).decode("ascii")
        return Figure("data:image/png;base64," + data, alt, caption, w, h)
    finally:
        _close(fig)


def warm_up() -> None:
    """Import matplotlib and draw a small figure with text and an image once (fonts, colormaps): the first
    report's real figures then cost only their own drawing."""
    fig = new_figure(2.0, 1.5)
    ax = fig.add_subplot(1, 1, 1)
    ax.imshow(np.zeros((2, 2)), cmap="viridis")
    ax.plot([0, 1], [0, 1], label="x")
    ax.set_title("warm-up")
    ax.legend()
    to_figure(fig, "")


def _close(fig):
    try:
        import sys
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None:
            plt.close(fig)   # only matters if someone registered it with pyplot
        fig.clear()
    except Exception:
        pass


def styled(fn):
    """Run a drawing function under the report's rc settings (fonts are read when artists are made)."""
    def wrapped(*a, **k):
        with _mpl()["matplotlib"].rc_context(RC):
            return fn(*a, **k)
    wrapped.__name__ = fn.__name__
    wrapped.__doc__ = fn.__doc__
    return wrapped


def colormap(name, bad="#d9d9d9"):
    cm = _mpl()["matplotlib"].colormaps[name]
    return cm.with_extremes(bad=bad)


def heat(ax, m, *, cmap="viridis", vmin=0.0, vmax=1.0, xt=None, yt=None, title=None):
    im = ax.imshow(np.ma.masked_invalid(m), cmap=colormap(cmap), vmin=vmin, vmax=vmax, aspect="auto",
                   interpolation="nearest")
    rows, cols = m.shape
    if xt is not None and cols <= 24:
        ax.set_xticks(range(cols), [str(t) for t in xt[:cols]] + [""] * (cols - len(xt[:cols])))
    elif cols <= 24:
        ax.set_xticks(range(cols))
    if yt is not None and rows <= 24:
        ax.set_yticks(range(rows), [str(t) for t in yt[:rows]] + [""] * (rows - len(yt[:rows])))
    elif yt is None and rows <= 24:
        ax.set_yticks(range(rows))
    ax.tick_params(length=2, pad=1.5)
    for s in ax.spines.values():
        s.set_visible(False)
    if title:
        ax.set_title(title, pad=3)
    return im


def fmt(v, nd=2) -> str:
    return "n/a" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.{nd}f}"
