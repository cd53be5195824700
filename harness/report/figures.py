"""The report's pictures: matplotlib (Agg, no pyplot state) to base64 PNG data URIs.

Every function takes artifacts exactly as they come out of a result (JSON:
lists of numbers that may contain None, may be ragged, may be huge) and
returns a list of Figure records, or raises FigureError with a sentence for
the reader. Nothing here touches pyplot's global figure list: each figure is
a bare matplotlib.figure.Figure with its own Agg canvas, dropped (and closed,
when pyplot happens to know it) as soon as its PNG is written, so memory does
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

def _num(v) -> float:
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
    vals = np.array([_num(x[i]) for i in idx], dtype=float)
    if not np.isfinite(vals).any():
        return None
    return idx + 1, vals


def values(x, limit: int = 20000) -> np.ndarray | None:
    """A flat array of the finite numbers in a list (for histograms)."""
    if not isinstance(x, (list, tuple)):
        return None
    step = max(1, len(x) // limit)
    arr = np.array([_num(v) for v in x[::step]], dtype=float)
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
            out[i, j] = _num(v)
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


def _tokens(x, limit=MAX_MATRIX) -> list:
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


def _close(fig):
    try:
        import sys
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None:
            plt.close(fig)   # only matters if someone registered it with pyplot
        fig.clear()
    except Exception:
        pass


def _style(fn):
    """Run a drawing function under the report's rc settings (fonts are read when artists are made)."""
    def wrapped(*a, **k):
        with _mpl()["matplotlib"].rc_context(RC):
            return fn(*a, **k)
    wrapped.__name__ = fn.__name__
    wrapped.__doc__ = fn.__doc__
    return wrapped


def _cmap(name, bad="#d9d9d9"):
    cm = _mpl()["matplotlib"].colormaps[name]
    return cm.with_extremes(bad=bad)


def _heat(ax, m, *, cmap="viridis", vmin=0.0, vmax=1.0, xt=None, yt=None, title=None):
    im = ax.imshow(np.ma.masked_invalid(m), cmap=_cmap(cmap), vmin=vmin, vmax=vmax, aspect="auto",
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


def _fmt(v, nd=2) -> str:
    return "n/a" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.{nd}f}"


# -- cross-attention --------------------------------------------------------------------------------

def expected_cross(src_tokens, rows, cols) -> np.ndarray:
    """The correct alignment for reversal: target position i attends to source position L-1-i.

    The last row (the query that predicts <eos>) has no single right answer: left blank (nan).
    """
    L = sum(1 for t in src_tokens[:cols] if t != PAD) if src_tokens else cols
    L = max(1, min(L, cols))
    e = np.zeros((rows, cols))
    e[L:, :] = np.nan
    for i in range(min(rows, L)):
        e[i, L - 1 - i] = 1.0
    return e


def _per_head(x, n):
    out = []
    for i in range(n):
        out.append(_num(x[i]) if isinstance(x, (list, tuple)) and i < len(x) else math.nan)
    return out


@_style
def cross_attention(ca: dict) -> list[Figure]:
    """One figure per decoder layer: the expected anti-diagonal, then every head."""
    if not isinstance(ca, dict):
        raise FigureError("the cross-attention record is not an object")
    layers = ca.get("layers")
    if not isinstance(layers, list) or not layers:
        raise FigureError("the cross-attention record has no layers")
    src = _tokens(ca.get("src"))
    tgt_in = _tokens(ca.get("tgt_in"))
    pred = _tokens(ca.get("pred"))
    figs = []
    for li, layer in enumerate(layers[:MAX_LAYERS]):
        if not isinstance(layer, dict):
            continue
        raw_maps = layer.get("maps")
        maps = stack(raw_maps, MAX_HEADS)
        if not any(m is not None for m in maps):
            continue
        n_heads = len(maps)
        rows = max(m.shape[0] for m in maps if m is not None)
        cols = max(m.shape[1] for m in maps if m is not None)
        anti = _per_head(layer.get("anti"), n_heads)
        diag = _per_head(layer.get("diag"), n_heads)
        L = sum(1 for t in src[:cols] if t != PAD) if src else cols
        xt = [token(t) for t in src[:cols]]
        want = [token(tgt_in[i + 1]) if i + 1 < len(tgt_in) and i < L else ("<eos>" if i == L else "")
                for i in range(rows)]
        yt = []
        for i in range(rows):
            p = token(pred[i]) if i < len(pred) else "?"
            mark = "*" if want[i] and p != want[i] else ""
            yt.append(f"{p}{mark}")
        per_row = min(n_heads, 4)
        nrows = math.ceil(n_heads / 4)
        cell = 1.75 if rows <= 12 and cols <= 12 else 2.2
        fig = new_figure((per_row + 1.3) * cell + 0.9, nrows * (cell + 0.45) + 0.6)
        gs = fig.add_gridspec(nrows, per_row + 2, width_ratios=[1, 0.3] + [1] * per_row, left=0.075,
                              right=0.915, bottom=0.16 / nrows + 0.05, top=1 - 0.26 / nrows, wspace=0.3,
                              hspace=0.6)
        exp = expected_cross(src, rows, cols)
        ax = fig.add_subplot(gs[0, 0])
        im = _heat(ax, exp, xt=xt, yt=want, title="expected (reversal)")
        ax.set_xlabel("source token")
        ax.set_ylabel("correct next token")
        for h, m in enumerate(maps):
            ax = fig.add_subplot(gs[h // 4, 2 + h % 4])
            if m is None:
                ax.set_axis_off()
                ax.set_title(f"head {h + 1}: malformed", pad=3)
                continue
            _heat(ax, m, xt=xt, yt=yt if h % 4 == 0 else None,
                  title=f"head {h + 1}\nanti {_fmt(anti[h])} · diag {_fmt(diag[h])}")
            if h % 4 == 0:
                ax.set_ylabel("generated token")
            else:
                ax.set_yticks([])   # same rows as the first head of the row; fewer ticks draw faster
            if h // 4 == nrows - 1:
                ax.set_xlabel("source token")
        cax = fig.add_axes([0.93, 0.2, 0.012, 0.6])
        fig.colorbar(im, cax=cax).ax.tick_params(labelsize=7)
        fig.suptitle(f"decoder layer {li + 1}: cross-attention after brief training", x=0.07, ha="left",
                     fontsize=9.5, fontweight="bold")
        finite_anti = [a for a in anti if math.isfinite(a)]
        mean_anti = sum(finite_anti) / len(finite_anti) if finite_anti else math.nan
        alt = (f"Cross-attention maps of decoder layer {li + 1}, {n_heads} head(s), for source "
               f"{' '.join(xt)}: rows are generated tokens, columns source tokens. "
               f"Anti-diagonal mass per head: {', '.join(_fmt(a) for a in anti)}; "
               f"diagonal mass per head: {', '.join(_fmt(d) for d in diag)}. "
               f"The first panel is the expected anti-diagonal.")
        cap = (f"Layer {li + 1}: mean anti-diagonal mass {_fmt(mean_anti)} over {n_heads} head(s)"
               + (f" (only the first {MAX_HEADS} heads are drawn)" if isinstance(raw_maps, list)
                  and len(raw_maps) > MAX_HEADS else ""))
        figs.append(to_figure(fig, alt, cap))
    if not figs:
        raise FigureError("no layer of the cross-attention record holds a usable map")
    return figs


# -- training curves --------------------------------------------------------------------------------

def _smooth(v: np.ndarray, k: int) -> np.ndarray:
    if k <= 1 or v.size < 2 * k:
        return v
    ok = np.isfinite(v)
    num = np.convolve(np.where(ok, v, 0.0), np.ones(k), "same")
    den = np.convolve(ok.astype(float), np.ones(k), "same")
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.maximum(den, 1), np.nan)


def _plot_series(ax, s, label, color, ls="-", smooth=False, raw_alpha=0.3, sparse=False):
    steps, v = s
    if sparse:   # sampled every few steps (None between): connect the samples
        ok = np.isfinite(v)
        steps, v = steps[ok], v[ok]
    if smooth and v.size > 40:
        ax.plot(steps, v, color=color, lw=0.6, alpha=raw_alpha, ls=ls)
        ax.plot(steps, _smooth(v, max(5, v.size // 40)), color=color, lw=1.6, ls=ls, label=label)
    else:
        ax.plot(steps, v, color=color, lw=1.4, ls=ls, label=label)


def _positive(s):
    return s is not None and np.nanmin(np.where(np.isfinite(s[1]), s[1], np.inf)) > 0


@_style
def training(tr: dict, ref: dict | None) -> Figure:
    if not isinstance(tr, dict):
        raise FigureError("the training record is not an object")
    panels = [("loss", "loss (cross-entropy)"), ("lr", "learning rate"), ("grad_norm", "gradient norm")]
    mine = {k: series(tr.get(k)) for k, _ in panels}
    theirs = {k: series(ref.get(k)) if isinstance(ref, dict) else None for k, _ in panels}
    shown = [(k, t) for k, t in panels if mine[k] is not None or theirs[k] is not None]
    if mine["loss"] is None and mine["lr"] is None:
        raise FigureError("the training record holds no loss or learning-rate values")
    fig = new_figure(3.2 * len(shown) + 0.4, 2.7)
    axes = [fig.add_subplot(1, len(shown), i + 1) for i in range(len(shown))]
    for ax, (k, title) in zip(axes, shown):
        if theirs[k] is not None:
            _plot_series(ax, theirs[k], "reference", ORANGE, ls="--", smooth=k == "loss", raw_alpha=0.2,
                         sparse=k == "grad_norm")
        if mine[k] is not None:
            _plot_series(ax, mine[k], "yours", BLUE, smooth=k == "loss", sparse=k == "grad_norm")
        if k == "loss":
            ax.axhline(math.log(13), color=GREY, lw=0.8, ls=":")
            ax.annotate("ln 13 = 2.565", (1, math.log(13)), xycoords=("axes fraction", "data"), ha="right",
                        va="bottom", fontsize=7, color=GREY)
            ax.set_ylim(bottom=0)
        if k == "grad_norm":
            top = max(float(np.nanmax(x[1])) for x in (mine[k], theirs[k]) if x is not None)
            ax.set_ylim(0, top * 1.1 if top > 0 else 1)
        if k == "lr" and _positive(mine[k]) and (theirs[k] is None or _positive(theirs[k])):
            ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel("optimizer step")
        ax.grid(alpha=0.25, lw=0.5)
    axes[0].legend(loc="upper right", frameon=False)
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.17, top=0.88, wspace=0.32)
    loss = mine["loss"][1] if mine["loss"] is not None else None
    tail = loss[np.isfinite(loss)][-20:] if loss is not None else np.array([])
    final = float(tail.mean()) if tail.size else math.nan
    ref_loss = theirs["loss"][1] if theirs["loss"] is not None else None
    rtail = ref_loss[np.isfinite(ref_loss)][-20:] if ref_loss is not None else np.array([])
    rfinal = float(rtail.mean()) if rtail.size else math.nan
    n = len(tr.get("loss") or []) if isinstance(tr.get("loss"), list) else 0
    alt = (f"Training curves of your train() over {n} steps: loss, learning rate and gradient norm per step"
           + (", with the reference's as dashed lines" if ref else "")
           + f". Mean loss of the last 20 steps: yours {_fmt(final)}"
           + (f", reference {_fmt(rfinal)}." if math.isfinite(rfinal) else "."))
    cap = f"Mean loss over the last 20 steps: {_fmt(final, 3)}" + \
          (f" (reference {_fmt(rfinal, 3)})" if math.isfinite(rfinal) else "")
    return to_figure(fig, alt, cap)


def lesson_schedule(n: int, peak=1e-3, warmup=400) -> np.ndarray:
    s = np.arange(n)
    return peak * np.minimum((s + 1) / warmup, 1.0)


@_style
def lr_trace(trace: dict) -> Figure:
    if not isinstance(trace, dict):
        raise FigureError("the trace record is not an object")
    lr = series(trace.get("lr"))
    if lr is None:
        raise FigureError("the trace holds no learning-rate values")
    steps, v = lr
    n = int(steps[-1])
    fig = new_figure(6.4, 2.6)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(steps, v, color=BLUE, lw=2.2, label="yours")
    ax.plot(steps, lesson_schedule(n)[steps - 1], color=ORANGE, ls="--", lw=1.3,
            label="lesson: linear warmup to 1e-3 over 400 steps")
    if np.nanmin(np.where(np.isfinite(v), v, np.inf)) > 0:
        ax.set_yscale("log")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("learning rate")
    ax.grid(alpha=0.25, lw=0.5)
    ax.legend(loc="lower right", frameon=False)
    fig.subplots_adjust(left=0.12, right=0.98, bottom=0.18, top=0.95)
    fin = v[np.isfinite(v)]
    first, peak = (float(fin[0]), float(fin.max())) if fin.size else (math.nan, math.nan)
    peak_step = int(steps[np.nanargmax(np.where(np.isfinite(v), v, -np.inf))]) if fin.size else 0
    alt = (f"Learning rate per optimizer step of your train() over {n} steps, on a log scale: "
           f"{first:.2e} at step 1, peak {peak:.2e} first reached near step {peak_step}; "
           f"the lesson's schedule (dashed) warms up linearly to 1e-3 over 400 steps.")
    cap = f"lr {first:.2e} at step 1, peak {peak:.2e} (near step {peak_step}); lesson: 2.5e-06 at step 1, 1e-3 from step 400"
    return to_figure(fig, alt, cap)


@_style
def overfit(curve) -> Figure:
    s = series(curve)
    if s is None:
        raise FigureError("the overfit record holds no loss values")
    steps, v = s
    fig = new_figure(6.4, 2.6)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(steps, v, color=BLUE, lw=1.6, label="your model, one fixed batch of 8")
    ax.axhline(0.05, color=VERMILION, ls="--", lw=1, label="pass: < 0.05 within 400 steps")
    ax.axhline(0.005, color=GREY, ls=":", lw=1, label="reference: < 0.005 by ~150 steps")
    if np.nanmin(np.where(np.isfinite(v), v, np.inf)) > 0:
        ax.set_yscale("log")
    ax.set_xlabel("Adam step (lr 1e-3, dropout 0)")
    ax.set_ylabel("loss")
    ax.grid(alpha=0.25, lw=0.5)
    ax.legend(loc="upper right", frameon=False)
    fig.subplots_adjust(left=0.12, right=0.98, bottom=0.18, top=0.95)
    fin = v[np.isfinite(v)]
    last = float(fin[-1]) if fin.size else math.nan
    alt = (f"Loss on one fixed batch over {int(steps[-1])} steps, log scale, from {_fmt(float(fin[0]), 3)} "
           f"to {_fmt(last, 4)}; the pass line is 0.05.") if fin.size else "Overfit curve with no finite values."
    cap = f"final loss {_fmt(last, 4)} after {int(steps[-1])} steps " + \
          ("(memorised)" if last < 0.05 else "(did not memorise: a wiring bug)")
    return to_figure(fig, alt, cap)


# -- positional encoding ----------------------------------------------------------------------------

@_style
def pe(table, diff) -> Figure:
    t = matrix(table, 200, 256)
    if t is None:
        raise FigureError("the positional table holds no numbers")
    d = matrix(diff, 200, 256) if diff is not None else None
    panels = [(t, "your table", "cividis", -1.0, 1.0)]
    if d is not None:
        formula = t[: d.shape[0], : d.shape[1]] - d
        lim = float(np.nanmax(np.abs(d))) or 1.0
        panels += [(formula, "the formula (sin even, cos odd)", "cividis", -1.0, 1.0),
                   (d, f"yours - formula (max |diff| {lim:.2f})", "PuOr", -lim, lim)]
    width = max(5.0, 3.4 * len(panels) + 0.6)
    fig = new_figure(width, 3.0)
    for i, (m, title, cmap, lo, hi) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        im = ax.imshow(np.ma.masked_invalid(m), cmap=_cmap(cmap), vmin=lo, vmax=hi, aspect="auto",
                       interpolation="nearest")
        ax.set_title(title, pad=3)
        ax.set_xlabel("dimension")
        if i == 0:
            ax.set_ylabel("position")
        fig.colorbar(im, ax=ax, fraction=0.05, pad=0.02).ax.tick_params(labelsize=7)
    fig.subplots_adjust(left=0.6 / width, right=1 - 0.4 / width, bottom=0.15, top=0.9, wspace=0.45)
    alt = (f"Heatmap of your positional-encoding table, {t.shape[0]} positions by {t.shape[1]} dimensions, "
           "values from -1 to 1" + (f"; beside it the formula and the difference, largest "
                                     f"{float(np.nanmax(np.abs(d))):.3f}" if d is not None else
                                     "; it matches the formula") + ".")
    cap = "matches the formula" if d is None else \
        f"differs from the formula by up to {float(np.nanmax(np.abs(d))):.3f}"
    return to_figure(fig, alt, cap)


# -- causal structure -------------------------------------------------------------------------------

@_style
def causal(dependency, target_mask) -> Figure:
    dep = matrix(dependency)
    tm = matrix(target_mask)
    if dep is None and tm is None:
        raise FigureError("neither the dependency matrix nor the target mask holds numbers")
    panels = []
    leaks = 0
    if dep is not None:
        T = dep.shape[0]
        shown = dep.copy()
        if dep.shape[1] > 0:
            shown[:, 0] = np.nan          # input 0 is <sos>: never varied
        moved = np.where(np.isfinite(shown), (shown > 1e-5).astype(float), np.nan)
        upper = np.triu(np.ones_like(moved, dtype=bool), 1)
        leaks = int(np.nansum(np.where(upper, moved, 0)))
        panels.append((moved, f"your model ({leaks} future leak{'s' if leaks != 1 else ''})",
                       "depends on input j", True))
        exp = np.tril(np.ones((T, dep.shape[1])))
        exp[:, 0] = np.nan
        panels.append((exp, "expected (causal)", "", False))
    if tm is not None:
        title = "your target_mask"
        if tm.shape[0] == 1 and tm.shape[1] > 1:      # (1, T): a padding-only mask, broadcast over every query
            tm = np.repeat(tm, tm.shape[1], axis=0)
            title = "your target_mask\n(one row for all queries)"
        panels.append((np.where(np.isfinite(tm), (tm != 0).astype(float), np.nan), title, "", False))
        if dep is None:
            panels.append((np.tril(np.ones(tm.shape)), "expected mask", "", False))
    fig = new_figure(2.9 * len(panels) + 0.3, 3.0)
    for i, (m, title, _, mark) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        _heat(ax, m, cmap="cividis", title=title)
        is_mask = "mask" in title
        ax.set_xlabel("key position" if is_mask else "changed input position j")
        ax.set_ylabel(("query position" if is_mask else "output position i") if i == 0 or is_mask else "")
        n = min(m.shape)
        ax.plot([-0.5, n - 0.5], [-0.5, n - 0.5], color=GREY, lw=0.6, ls=":")
        if mark:
            ii, jj = np.nonzero(np.triu(np.nan_to_num(m) > 0, 1))
            if ii.size:
                ax.scatter(jj, ii, marker="x", s=18, c=VERMILION, linewidths=1.2)
    fig.subplots_adjust(left=0.55 / fig.get_size_inches()[0], right=0.98, bottom=0.16, top=0.9, wspace=0.35)
    alt = ("Causal structure: " + (f"a {dep.shape[0]}x{dep.shape[1]} grid of which decoder outputs change "
                                   f"when one decoder input changes, {leaks} cell(s) above the diagonal "
                                   f"(future leaks, marked with crosses)" if dep is not None else "")
           + ("; " if dep is not None and tm is not None else "")
           + (f"your target mask, {tm.shape[0]}x{tm.shape[1]}" if tm is not None else "")
           + ". Correct is lower-triangular.")
    key = ("Light: output i changes when input j changes (for a mask: may attend); dark: it does not; "
           "grey column: input 0 is always <sos> and is never changed.")
    cap = ("No output depends on a later input. " if dep is not None and leaks == 0 else
           f"{leaks} (output, later input) pair(s) leak (crosses). " if dep is not None else "") + key
    return to_figure(fig, alt, cap)


# -- attention at init ------------------------------------------------------------------------------

@_style
def rowmax(vals) -> Figure:
    v = values(vals)
    if v is None:
        raise FigureError("the list of row maxima holds no numbers")
    fig = new_figure(6.4, 3.0)
    ax = fig.add_subplot(1, 1, 1)
    ax.axvspan(0.45, 0.53, color=SKY, alpha=0.35, lw=0, label="reference mean 0.45-0.53")
    ax.hist(np.clip(v, 0, 1), bins=np.linspace(0, 1, 41), color=BLUE, alpha=0.9, label="your rows")
    mean = float(v.mean())
    ax.axvline(mean, color="black", lw=1.2, ls="-", label=f"your mean {mean:.2f}")
    ax.axvline(0.8, color=VERMILION, lw=1.2, ls="--", label="typical without 1/sqrt(d_k): ~0.8")
    ax.set_xlim(0, 1)
    ax.set_xlabel("largest attention weight in a row (untrained model)")
    ax.set_ylabel("rows")
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), ncol=2, frameon=False)
    fig.subplots_adjust(left=0.1, right=0.98, bottom=0.16, top=0.8)
    alt = (f"Histogram of the largest attention weight per row at initialisation over {v.size} rows; "
           f"mean {mean:.2f} (reference 0.45-0.53, about 0.8 without the 1/sqrt(d_k) scaling).")
    cap = f"mean {mean:.3f} over {v.size} rows" + (" - saturated" if mean > 0.75 else "")
    return to_figure(fig, alt, cap)


@_style
def block_weights(bw: dict) -> Figure:
    if not isinstance(bw, dict):
        raise FigureError("the block-weights record is not an object")
    rows = []
    for key, label in (("plain", "no mask"), ("causal", "causal mask")):
        maps = stack(bw.get(key), MAX_HEADS)
        if any(m is not None for m in maps):
            rows.append((label, maps))
    if not rows:
        raise FigureError("the block-weights record holds no usable map")
    n = max(len(m) for _, m in rows)
    peak = max(float(np.nanmax(m)) for _, maps in rows for m in maps if m is not None)
    vmax = min(1.0, max(0.2, math.ceil(peak * 10) / 10))     # near-uniform rows (1/T) stay visible
    cell = 2.5 if n <= 3 else 1.9
    fig = new_figure(cell * n + 1.0, (cell + 0.2) * len(rows) + 0.4)
    gs = fig.add_gridspec(len(rows), n, left=0.08, right=0.9, bottom=0.1, top=0.9, wspace=0.3, hspace=0.6)
    im = None
    for r, (label, maps) in enumerate(rows):
        for h, m in enumerate(maps):
            ax = fig.add_subplot(gs[r, h])
            if m is None:
                ax.set_axis_off()
                ax.set_title(f"{label}, head {h + 1}: malformed", pad=3)
                continue
            im = _heat(ax, m, title=f"{label}, head {h + 1}", vmax=vmax)
            up = np.triu(np.nan_to_num(m), 1)
            if label == "causal mask" and up.max() > 1e-6:
                ii, jj = np.nonzero(up > 1e-6)
                ax.scatter(jj, ii, marker="x", s=12, c=VERMILION, linewidths=1)
            if h == 0:
                ax.set_ylabel("query position")
            ax.set_xlabel("key position")
    if im is not None:
        cax = fig.add_axes([0.92, 0.2, 0.012, 0.6])
        fig.colorbar(im, cax=cax).ax.tick_params(labelsize=7)
    alt = (f"Self-attention weights of each of {n} head(s) of your TransformerBlock, "
           + " and ".join(label for label, _ in rows) + "; with the causal mask everything above the "
           "diagonal must be zero (violations marked with crosses).")
    leaks = sum(int((np.triu(np.nan_to_num(m), 1) > 1e-6).sum()) for label, maps in rows if label == "causal mask"
                for m in maps if m is not None)
    cap = (f"Colour scale 0 to {vmax:.1f}. " + ("With the causal mask, no weight above the diagonal." if leaks == 0
           else f"With the causal mask, {leaks} weight(s) above the diagonal (crosses): the future is visible.")
           if any(label == "causal mask" for label, _ in rows) else f"Colour scale 0 to {vmax:.1f}.")
    return to_figure(fig, alt, cap)
