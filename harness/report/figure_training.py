"""The report's training pictures: loss, learning rate and gradient norm per step, the lr trace, the overfit curve."""
from __future__ import annotations

import math

import numpy as np

from ..checks import BY_ID, bound, num, value
from .figure_common import BLUE, GREY, ORANGE, VERMILION, Figure, FigureError, fmt, new_figure, series, to_figure

# declared in checks.py (the probe and the check's expected text use the same values)
OVERFIT = BY_ID["overfit"]
LESSON_PEAK, LESSON_WARMUP = value("lr-schedule", "lesson_peak"), value("lr-schedule", "lesson_warmup")
LAST = value("brief-training", "last")        # the brief-training check's mean: the same steps


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
        ax.line(steps, v, color, lw=0.6, alpha=raw_alpha, ls=ls)
        ax.line(steps, _smooth(v, max(5, v.size // 40)), color, lw=1.6, ls=ls, label=label)
    else:
        ax.line(steps, v, color, lw=1.4, ls=ls, label=label)


def _positive(s):
    return s is not None and np.nanmin(np.where(np.isfinite(s[1]), s[1], np.inf)) > 0


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
    grid = fig.grid(1, len(shown), left=0.07, right=0.98, bottom=0.17, top=0.88, wspace=0.32)
    axes = [fig.axes(*grid[(0, i)]) for i in range(len(shown))]
    for ax, (k, title) in zip(axes, shown):
        if theirs[k] is not None:
            _plot_series(ax, theirs[k], "reference", ORANGE, ls="--", smooth=k == "loss", raw_alpha=0.2,
                         sparse=k == "grad_norm")
        if mine[k] is not None:
            _plot_series(ax, mine[k], "yours", BLUE, smooth=k == "loss", sparse=k == "grad_norm")
        if k == "loss":
            ax.hline(math.log(13), GREY, lw=0.8, ls=":")
            ax.text(1, math.log(13), "ln 13 = 2.565", coords=("axes", "data"), anchor="end", colour=GREY)
            ax.set_ylim(bottom=0)
        if k == "grad_norm":
            top = max(float(np.nanmax(x[1])) for x in (mine[k], theirs[k]) if x is not None)
            ax.set_ylim(0, top * 1.1 if top > 0 else 1)
        if k == "lr" and _positive(mine[k]) and (theirs[k] is None or _positive(theirs[k])):
            ax.log_y()
        ax.title(title)
        ax.xlabel("optimizer step")
        ax.grid()
    axes[0].legend("upper right")
    loss = mine["loss"][1] if mine["loss"] is not None else None
    tail = loss[np.isfinite(loss)][-LAST:] if loss is not None else np.array([])
    final = float(tail.mean()) if tail.size else math.nan
    ref_loss = theirs["loss"][1] if theirs["loss"] is not None else None
    rtail = ref_loss[np.isfinite(ref_loss)][-LAST:] if ref_loss is not None else np.array([])
    rfinal = float(rtail.mean()) if rtail.size else math.nan
    n = len(tr.get("loss") or []) if isinstance(tr.get("loss"), list) else 0
    alt = (f"Training curves of your train() over {n} steps: loss, learning rate and gradient norm per step"
           + (", with the reference's as dashed lines" if ref else "")
           + f". Mean loss of the last {LAST} steps: yours {fmt(final)}"
           + (f", reference {fmt(rfinal)}." if math.isfinite(rfinal) else "."))
    cap = f"Mean loss over the last {LAST} steps: {fmt(final, 3)}" + \
          (f" (reference {fmt(rfinal, 3)})" if math.isfinite(rfinal) else "")
    return to_figure(fig, alt, cap)


def lesson_schedule(n: int, peak=LESSON_PEAK, warmup=LESSON_WARMUP) -> np.ndarray:
    s = np.arange(n)
    return peak * np.minimum((s + 1) / warmup, 1.0)


def lr_trace(trace: dict) -> Figure:
    if not isinstance(trace, dict):
        raise FigureError("the trace record is not an object")
    lr = series(trace.get("lr"))
    if lr is None:
        raise FigureError("the trace holds no learning-rate values")
    steps, v = lr
    n = int(steps[-1])
    fig = new_figure(6.4, 2.6)
    ax = _curve_axes(fig, v, "optimizer step", "learning rate", "lower right")
    ax.line(steps, v, BLUE, lw=2.2, label="yours")
    ax.line(steps, lesson_schedule(n)[steps - 1], ORANGE, ls="--", lw=1.3,
            label=f"lesson: linear warmup to {num(LESSON_PEAK)} over {LESSON_WARMUP} steps")
    fin = v[np.isfinite(v)]
    first, peak = (float(fin[0]), float(fin.max())) if fin.size else (math.nan, math.nan)
    peak_step = int(steps[np.nanargmax(np.where(np.isfinite(v), v, -np.inf))]) if fin.size else 0
    alt = (f"Learning rate per optimizer step of your train() over {n} steps, on a log scale: "
           f"{first:.2e} at step 1, peak {peak:.2e} first reached near step {peak_step}; "
           f"the lesson's schedule (dashed) warms up linearly to {num(LESSON_PEAK)} over {LESSON_WARMUP} steps.")
    cap = (f"lr {first:.2e} at step 1, peak {peak:.2e} (near step {peak_step}); lesson: "
           f"{num(LESSON_PEAK / LESSON_WARMUP)} at step 1, {num(LESSON_PEAK)} from step {LESSON_WARMUP}")
    return to_figure(fig, alt, cap)


def _curve_axes(fig, v, xlabel: str, ylabel: str, legend: str):
    """One curve's axes: a log scale when every value is positive, labels, a light grid, the legend."""
    ax = fig.axes(0.12, 0.18, 0.86, 0.77)
    if np.nanmin(np.where(np.isfinite(v), v, np.inf)) > 0:
        ax.log_y()
    ax.xlabel(xlabel)
    ax.ylabel(ylabel)
    ax.grid()
    ax.legend(legend)
    return ax


def overfit(curve) -> Figure:
    s = series(curve)
    if s is None:
        raise FigureError("the overfit record holds no loss values")
    steps, v = s
    fig = new_figure(6.4, 2.6)
    ax = _curve_axes(fig, v, f"Adam step (lr {num(value('overfit', 'lr'))}, dropout 0)", "loss", "upper right")
    ax.line(steps, v, BLUE, lw=1.6, label=f"your model, one fixed batch of {value('overfit', 'batch')}")
    line = bound("overfit")
    assert line.hi is not None              # overfit passes below a loss (checks.py declares an upper bound)
    ax.hline(line.hi, VERMILION, ls="--", lw=1,
             label=f"pass: {OVERFIT.text} within {value('overfit', 'max_steps')} steps")
    fin = v[np.isfinite(v)]
    last = float(fin[-1]) if fin.size else math.nan
    alt = (f"Loss on one fixed batch over {int(steps[-1])} steps, log scale, from {fmt(float(fin[0]), 3)} "
           f"to {fmt(last, 4)}; the pass line is {num(line.hi)}.") if fin.size else \
        "Overfit curve with no finite values."
    cap = f"final loss {fmt(last, 4)} after {int(steps[-1])} steps " + \
          ("(memorised)" if line.ok(last) else "(did not memorise: a wiring bug)")
    return to_figure(fig, alt, cap)
