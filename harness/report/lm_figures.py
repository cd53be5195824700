"""The `lm` report's pictures, from the artifacts of harness/child/probes/lm/pictures.py.

    rope_stats(art) / rope_relative(art)   q_m . k_n against m - n: your scores (dots) on the reference's curve
    lm_causal(art)                         which LM outputs move when one input token changes (T x T)
    lr_schedule(art)                       your cosine schedule against the reference's

Artifacts are untrusted JSON (numbers may be None, lists ragged or huge): each function either returns a
Figure or raises FigureError with a sentence for the reader. Drawing goes through figure_common.py's public helpers.
"""
from __future__ import annotations

import math

import numpy as np

from .figure_common import (
    BLUE,
    GREY,
    ORANGE,
    VERMILION,
    Figure,
    FigureError,
    heat,
    matrix,
    new_figure,
    num,
    to_figure,
)
from .svg_base import PT

MAX_PAIRS = 5000      # the probe stores 32 x 32 = 1024


def _array(x, limit: int = MAX_PAIRS) -> np.ndarray | None:
    if not isinstance(x, (list, tuple)) or not x:
        return None
    return np.array([num(v) for v in x[:limit]], dtype=float)


def _sci(v: float) -> str:
    return "n/a" if not math.isfinite(v) else "0" if v == 0 else f"{v:.2g}"


# -- RoPE ------------------------------------------------------------------------------------------

def rope_stats(art) -> dict:
    """{offset, score, ref_offset, ref_score (arrays), spread, max_dev}: spread is the largest range of your
    scores over pairs with the same offset (0 for any relative implementation), max_dev the largest distance
    from the reference's score at that offset; both in units of |q| |k|."""
    if not isinstance(art, dict):
        raise FigureError("the RoPE measurement is not a table of scores")
    off, score = _array(art.get("offset")), _array(art.get("score"))
    ref_off, ref_score = _array(art.get("ref_offset"), 1000), _array(art.get("ref_score"), 1000)
    if off is None or score is None or len(off) != len(score):
        raise FigureError("the RoPE scores are missing or do not match their offsets")
    ok = np.isfinite(off) & np.isfinite(score)
    if not ok.any():
        raise FigureError("none of your RoPE scores is a finite number")
    ref = {}
    if ref_off is not None and ref_score is not None and len(ref_off) == len(ref_score):
        ref = {o: s for o, s in zip(ref_off.tolist(), ref_score.tolist()) if math.isfinite(o) and math.isfinite(s)}
    spreads = [float(np.ptp(score[ok & (off == o)])) for o in np.unique(off[ok])]
    dev = [abs(s - ref[o]) for o, s in zip(off[ok].tolist(), score[ok].tolist()) if o in ref]
    # the probe's exact numbers when present (the stored scores are rounded to 5 digits)
    spread = num(art.get("spread")) if math.isfinite(num(art.get("spread"))) else max(spreads)
    max_dev = num(art.get("max_dev")) if math.isfinite(num(art.get("max_dev"))) else \
        (max(dev) if dev else math.nan)
    return {"offset": off, "score": score, "ok": ok, "ref": ref, "spread": spread, "max_dev": max_dev,
            "nonfinite": int((~np.isfinite(score)).sum())}


def rope_relative(art) -> Figure:
    st = rope_stats(art)
    off, score, ok, ref = st["offset"], st["score"], st["ok"], st["ref"]
    fig = new_figure(6.4, 3.0)
    ax = fig.axes(0.11, 0.16, 0.87, 0.72)
    if ref:
        xs = sorted(ref)
        ax.line(xs, [ref[x] for x in xs], BLUE, lw=1.6, label="reference (one value per offset)")
    ax.scatter(off[ok], score[ok], ORANGE, size=1.5 * PT, alpha=0.55, label="yours (every pair m, n)")
    ax.hline(0, GREY, lw=0.5, ls=":")
    ax.xlabel("offset m - n (query position - key position)")
    ax.ylabel("q_m . k_n / (|q| |k|)")
    ax.legend("above")
    n_pairs = int(ok.sum())
    alt = (f"RoPE scores against the offset m - n: {n_pairs} pairs of positions; scores at the same offset "
           f"spread by {_sci(st['spread'])} and differ from the reference's by up to {_sci(st['max_dev'])} "
           f"(relative to |q| |k|).")
    if st["spread"] > 1e-4:
        cap = (f"Your scores at the same offset differ by up to {_sci(st['spread'])}: q_m . k_n depends on the "
               "positions themselves, not only on m - n (each column of dots should be one dot).")
    elif not math.isfinite(st["max_dev"]):
        cap = "Your scores depend only on m - n. The reference's curve is not in this result."
    elif st["max_dev"] > 1e-4:
        cap = (f"Your scores depend only on m - n, but not as the reference's do (up to {_sci(st['max_dev'])} "
               "apart): a different rotation (pairs, frequencies or its direction).")
    else:
        cap = "Your scores depend only on m - n and lie on the reference's curve."
    cap += (f" Measured (relative to |q| |k|): spread at equal offsets {_sci(st['spread'])}, largest distance "
            f"from the reference {_sci(st['max_dev'])}.")
    if st["nonfinite"]:
        cap += f" {st['nonfinite']} score(s) are NaN or infinite and are not drawn."
    return to_figure(fig, alt, cap)


# -- causal dependency of the LM -------------------------------------------------------------------

def lm_causal(art) -> Figure:
    if not isinstance(art, dict):
        raise FigureError("the dependency measurement is not a matrix")
    dep = matrix(art.get("matrix"), 32, 32)
    if dep is None:
        raise FigureError("the dependency matrix holds no numbers")
    tol = num(art.get("tol"))
    tol = tol if math.isfinite(tol) and tol > 0 else 1e-4
    t = min(dep.shape)
    upper = np.triu(np.ones(dep.shape, dtype=bool), 1)
    leaks = upper & np.isfinite(dep) & (dep > tol)
    lower_dead = ~upper & np.isfinite(dep) & (dep <= tol)
    shown = np.log10(np.clip(dep, 1e-7, 1.0))                   # nan stays nan (grey)
    fig = new_figure(6.2, 3.0)
    panels = ((shown, f"your model ({int(leaks.sum())} future leak{'s' if leaks.sum() != 1 else ''})"),
              (np.where(np.tril(np.ones(dep.shape)) > 0, 0.0, -7.0), "expected (causal)"))
    grid = fig.grid(1, 2, left=0.09, right=0.82, bottom=0.16, top=0.9, wspace=0.3)
    for k, (m, title) in enumerate(panels):
        ax = fig.axes(*grid[(0, k)])
        heat(ax, m, cmap="cividis", vmin=-7, vmax=0, title=title)
        ax.xlabel("changed input position j")
        if k == 0:
            ax.ylabel("output position i")
        ax.line([-0.5, t - 0.5], [-0.5, t - 0.5], GREY, lw=0.6, ls=":")
        if k == 0 and leaks.any():
            ii, jj = np.nonzero(leaks)
            ax.scatter(jj, ii, VERMILION, marker="x", size=2.3 * PT)
    fig.colorbar(0.845, 0.16, 0.018, 0.74, "cividis", -7.0, 0.0, label="log10 relative change")
    alt = (f"Causal dependency of your run_transformer_lm: a {dep.shape[0]}x{dep.shape[1]} grid of how far output i "
           f"moves when input token j changes; {int(leaks.sum())} cell(s) above the diagonal move (future leaks, "
           "marked with crosses). Correct is lower-triangular.")
    cap = (f"{int(leaks.sum())} (output, later input) pair(s) move by more than {tol:g} of the largest logit "
           "(crosses): those outputs see the future. " if leaks.any() else
           "No output depends on a later input. ")
    if lower_dead.any():
        cap += (f"{int(lower_dead.sum())} cell(s) on or below the diagonal do not move: those outputs ignore "
                "an earlier token they should see. ")
    cap += "Colour: how far output i moves when token j changes, relative to the largest logit (log scale)."
    return to_figure(fig, alt, cap)


# -- learning-rate schedule ------------------------------------------------------------------------

def lr_schedule(art) -> Figure:
    if not isinstance(art, dict):
        raise FigureError("the schedule measurement is not a table")
    its, lr, ref = _array(art.get("it"), 2000), _array(art.get("lr"), 2000), _array(art.get("ref"), 2000)
    if its is None or lr is None or len(its) != len(lr) or not np.isfinite(lr).any():
        raise FigureError("your learning rates are missing or do not match their iterations")
    have_ref = ref is not None and len(ref) == len(its)
    dev = float(np.nanmax(np.abs(lr - ref))) if have_ref and np.isfinite(lr - ref).any() else math.nan
    fig = new_figure(6.0, 2.8)
    ax = fig.axes(0.1, 0.17, 0.88, 0.78)
    if have_ref:
        ax.line(its, ref, BLUE, lw=1.6, label="reference")
    ax.line(its, lr, ORANGE, lw=1.2, ls="--", marker="o", label="yours")
    for key, text, side in (("warmup", "end of warmup", "start"), ("cycle", "end of the cosine cycle", "end")):
        x = num(art.get(key))
        if math.isfinite(x):
            ax.vline(x, GREY, lw=0.6, ls=":")
            ax.text(x, 1.0, (" " + text) if side == "start" else (text + " "), coords=("data", "axes"),
                    anchor=side, colour=GREY, baseline="hanging")
    ax.xlabel("iteration")
    ax.ylabel("learning rate")
    ax.legend("center right")
    settings = ", ".join(f"{k} {fmt}" for k, fmt in (("max", art.get("max_lr")), ("min", art.get("min_lr")),
                                                     ("warmup", art.get("warmup")), ("cycle", art.get("cycle")))
                         if isinstance(fmt, (int, float)))
    alt = (f"Learning rate per iteration of your run_get_lr_cosine_schedule ({settings}) against the reference's; "
           f"largest difference {_sci(dev)}.")
    cap = (f"Yours follows the reference at every iteration ({settings})." if math.isfinite(dev) and dev <= 1e-6
           else f"Largest difference from the reference: {_sci(dev)} ({settings}).")
    return to_figure(fig, alt, cap)


def training_curve(art) -> Figure:
    """The brief training: your loss per step on the corpus and on one batch, the reference's beside each."""
    if not isinstance(art, dict):
        raise FigureError("the training measurement is not a table")
    loss, ref = _array(art.get("loss"), 1000), _array(art.get("ref"), 1000)
    fit, fit_ref = _array(art.get("overfit"), 1000), _array(art.get("overfit_ref"), 1000)
    if ref is None or fit_ref is None:
        raise FigureError("the reference's losses are missing")
    fig = new_figure(6.0, 2.8)
    ax = fig.axes(0.1, 0.17, 0.88, 0.78)
    ax.line(np.arange(len(ref)), ref, BLUE, lw=1.6, label="reference, corpus")
    ax.line(np.arange(len(fit_ref)), fit_ref, GREY, lw=1.6, label="reference, one batch")
    if loss is not None and np.isfinite(loss).any():
        ax.line(np.arange(len(loss)), loss, ORANGE, lw=1.2, ls="--", marker="o", label="yours, corpus")
    if fit is not None and np.isfinite(fit).any():
        ax.line(np.arange(len(fit)), fit, VERMILION, lw=1.2, ls="--", label="yours, one batch")
    lnv = num(art.get("ln_vocab"))
    if math.isfinite(lnv):
        ax.hline(lnv, GREY, lw=0.6, ls=":")
    ax.xlabel("step")
    ax.ylabel("cross-entropy loss")
    ax.legend("upper right")
    nan = art.get("nan") if isinstance(art.get("nan"), dict) else None
    end = f"yours ends at {loss[-1]:.3g}, the reference at {ref[-1]:.3g}" if loss is not None and len(loss) else \
        "yours recorded no loss"
    alt = (f"Loss per training step of your model with your training pieces against the reference's on the same "
           f"batches from the same weights; {end}; dotted line: ln(vocab) = {lnv:.3g}.")
    cap = (f"A non-finite value at step {nan.get('step')} ({nan.get('stage')}). " if nan else "") + \
        f"On the corpus {end}; on one batch yours ends at " + \
        (f"{fit[-1]:.3g}" if fit is not None and len(fit) else "?") + f", the reference at {fit_ref[-1]:.3g}."
    return to_figure(fig, alt, cap)
