"""The report's attention pictures: cross-attention after brief training, the causal structure, attention at init."""
from __future__ import annotations

import math

import numpy as np

from ..checks import BY_ID, bound, spread, value
from .figure_common import (
    BLUE,
    GREY,
    MAX_HEADS,
    MAX_LAYERS,
    PAD,
    SKY,
    VERMILION,
    Figure,
    FigureError,
    fmt,
    heat,
    matrix,
    new_figure,
    num,
    stack,
    to_figure,
    token,
    tokens,
    values,
)
from .svg_base import PT

CROSS = 2.1          # half-width in px of a cross marking a leak


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
        out.append(num(x[i]) if isinstance(x, (list, tuple)) and i < len(x) else math.nan)
    return out


def cross_attention(ca: dict) -> list[Figure]:
    """One figure per decoder layer: the expected anti-diagonal, then every head."""
    if not isinstance(ca, dict):
        raise FigureError("the cross-attention record is not an object")
    layers = ca.get("layers")
    if not isinstance(layers, list) or not layers:
        raise FigureError("the cross-attention record has no layers")
    src = tokens(ca.get("src"))
    tgt_in = tokens(ca.get("tgt_in"))
    pred = tokens(ca.get("pred"))
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
        gs = fig.grid(nrows, per_row + 2, width_ratios=[1, 0.3] + [1] * per_row, left=0.075, right=0.915,
                      bottom=0.16 / nrows + 0.05, top=1 - 0.26 / nrows, wspace=0.3, hspace=0.6)
        exp = expected_cross(src, rows, cols)
        ax = fig.axes(*gs[(0, 0)])
        heat(ax, exp, xt=xt, yt=want, title="expected (reversal)")
        ax.xlabel("source token")
        ax.ylabel("correct next token")
        for h, m in enumerate(maps):
            ax = fig.axes(*gs[(h // 4, 2 + h % 4)])
            if m is None:
                ax.off()
                ax.title(f"head {h + 1}: malformed")
                continue
            # the rows are those of the first head of the row: labelled once
            heat(ax, m, xt=xt, yt=yt, yticks=h % 4 == 0, title=f"head {h + 1}\nanti {fmt(anti[h])} · diag {fmt(diag[h])}")
            if h % 4 == 0:
                ax.ylabel("predicted, teacher-forced")
            if h // 4 == nrows - 1:
                ax.xlabel("source token")
        fig.colorbar(0.93, 0.2, 0.012, 0.6, "viridis", 0.0, 1.0)
        fig.text(0.07, 0.99, f"decoder layer {li + 1}: cross-attention after brief training, teacher-forced "
                 "(the correct previous tokens fed in)", size=9.5 * PT,
                 weight="bold", baseline="hanging")
        finite_anti = [a for a in anti if math.isfinite(a)]
        mean_anti = sum(finite_anti) / len(finite_anti) if finite_anti else math.nan
        alt = (f"Cross-attention maps of decoder layer {li + 1}, {n_heads} head(s), for source "
               f"{' '.join(xt)}, teacher-forced (the correct previous target tokens are fed in): rows are the "
               f"model's prediction at each target position, columns source tokens. "
               f"Anti-diagonal mass per head: {', '.join(fmt(a) for a in anti)}; "
               f"diagonal mass per head: {', '.join(fmt(d) for d in diag)}. "
               f"The first panel is the expected anti-diagonal.")
        cap = (f"Layer {li + 1}: mean anti-diagonal mass {fmt(mean_anti)} over {n_heads} head(s)"
               + (f" (only the first {MAX_HEADS} heads are drawn)" if isinstance(raw_maps, list)
                  and len(raw_maps) > MAX_HEADS else ""))
        figs.append(to_figure(fig, alt, cap))
    if not figs:
        raise FigureError("no layer of the cross-attention record holds a usable map")
    own = _own_decode_figure(ca.get("own"), src, tgt_in)
    return figs + ([own] if own is not None else [])


def _own_decode_figure(own, src, tgt_in) -> Figure | None:
    """The second panel: cross-attention (mean over heads, per layer) while the model reads back its own greedy
    decode. Rows are the tokens it produced (* where one differs from the correct reversal): a model that leaks
    the future shows a clean anti-diagonal teacher-forced and its wrong decode here."""
    if not isinstance(own, dict) or not isinstance(own.get("layers"), list) or not own["layers"]:
        return None
    decoded = tokens(own.get("decoded"))
    maps = [m for m in stack(own["layers"][:MAX_LAYERS], MAX_LAYERS) if m is not None]
    if not maps or not decoded:
        return None
    rows, cols = maps[0].shape
    xt = [token(t) for t in (src or [])[:cols]]
    L = sum(1 for t in (src or [])[:cols] if t != PAD) or cols
    out = decoded[1:rows + 1]                     # what it produced at each position (the first is the start)
    yt, wrong = [], 0
    for i in range(rows):                         # the correct next token as the teacher-forced maps label it
        p = token(out[i]) if i < len(out) else "–"
        good = token(tgt_in[i + 1]) if i + 1 < len(tgt_in) and i < L else ("<eos>" if i == L else "")
        bad = bool(good) and p != good
        wrong += bad
        yt.append(f"{p}{'*' if bad else ''}")
    cell = 1.75 if rows <= 12 and cols <= 12 else 2.2
    n = len(maps)
    fig = new_figure(n * cell + 1.6, cell + 1.05)
    gs = fig.grid(1, n, left=0.14, right=0.88, bottom=0.2, top=0.78, wspace=0.35)
    for li, m in enumerate(maps):
        ax = fig.axes(*gs[(0, li)])
        heat(ax, m, xt=xt, yt=yt, yticks=li == 0, title=f"layer {li + 1}, mean over heads")
        ax.xlabel("source token")
        if li == 0:
            ax.ylabel("its own decode")
    fig.colorbar(0.91, 0.2, 0.012, 0.58, "viridis", 0.0, 1.0)
    fig.text(0.03, 0.99, "cross-attention on the model's own greedy decode (nothing correct fed in)",
             size=9.5 * PT, weight="bold", baseline="hanging")
    shown = " ".join(token(t) for t in out[:L + 1])
    verdict = (f"{wrong} of {min(rows, L + 1)} decoded token(s) differ from the correct reversal (marked *)"
               if wrong else "the decode is the correct reversal")
    alt = (f"Cross-attention, mean over heads, of {n} decoder layer(s) while the model reads back its own greedy "
           f"decode of source {' '.join(xt)}: it decoded {shown}; {verdict}.")
    cap = f"Its own greedy decode: {shown} ({verdict})."
    return to_figure(fig, alt, cap)


# -- causal structure -------------------------------------------------------------------------------

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
    width = 2.9 * len(panels) + 0.3
    fig = new_figure(width, 3.0)
    grid = fig.grid(1, len(panels), left=0.55 / width, right=0.98, bottom=0.16, top=0.9, wspace=0.35)
    for i, (m, title, _, mark) in enumerate(panels):
        ax = fig.axes(*grid[(0, i)])
        heat(ax, m, cmap="cividis", title=title)
        is_mask = "mask" in title
        ax.xlabel("key position" if is_mask else "changed input position j")
        ax.ylabel(("query position" if is_mask else "output position i") if i == 0 or is_mask else "")
        n = min(m.shape)
        ax.line([-0.5, n - 0.5], [-0.5, n - 0.5], GREY, lw=0.6, ls=":")
        if mark:
            ii, jj = np.nonzero(np.triu(np.nan_to_num(m) > 0, 1))
            if ii.size:
                ax.scatter(jj, ii, VERMILION, marker="x", size=CROSS * PT)
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

def rowmax(vals) -> Figure:
    v = values(vals)
    if v is None:
        raise FigureError("the list of row maxima holds no numbers")
    fig = new_figure(6.4, 3.0)
    ax = fig.axes(0.1, 0.16, 0.88, 0.64)
    sat = BY_ID["attn-saturation"]           # the check's declared spreads: the figure states the same
    good, bad = spread("attn-saturation"), value("attn-saturation", "unscaled")
    ax.vspan(good.lo, good.hi, SKY, alpha=0.35, label=f"correct code's mean {good}")
    edges = np.linspace(0, 1, 41)
    ax.bars(edges, np.histogram(np.clip(v, 0, 1), bins=edges)[0], BLUE, alpha=0.9, label="your rows")
    mean = float(v.mean())
    ax.vline(mean, "black", lw=1.2, label=f"your mean {mean:.2f}")
    ax.vspan(bad.lo, bad.hi, VERMILION, alpha=0.25, label=f"without 1/sqrt(d_k): {bad}")
    ax.set_xlim(0, 1)
    ax.xlabel("largest attention weight in a row (untrained model)")
    ax.ylabel("rows")
    ax.legend("above")
    alt = (f"Histogram of the largest attention weight per row at initialisation over {v.size} rows; "
           f"mean {mean:.2f} (correct code {good}, {bad} without the 1/sqrt(d_k) scaling; the check fails "
           f"at {sat.text}).")
    cap = f"mean {mean:.3f} over {v.size} rows" + (" - saturated" if not bound("attn-saturation").ok(mean) else "")
    return to_figure(fig, alt, cap)


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
    gs = fig.grid(len(rows), n, left=0.08, right=0.9, bottom=0.1, top=0.9, wspace=0.3, hspace=0.6)
    drawn = False
    for r, (label, maps) in enumerate(rows):
        for h, m in enumerate(maps):
            ax = fig.axes(*gs[(r, h)])
            if m is None:
                ax.off()
                ax.title(f"{label}, head {h + 1}: malformed")
                continue
            heat(ax, m, title=f"{label}, head {h + 1}", vmax=vmax)
            drawn = True
            up = np.triu(np.nan_to_num(m), 1)
            if label == "causal mask" and up.max() > 1e-6:
                ii, jj = np.nonzero(up > 1e-6)
                ax.scatter(jj, ii, VERMILION, marker="x", size=0.8 * CROSS * PT)
            if h == 0:
                ax.ylabel("query position")
            ax.xlabel("key position")
    if drawn:
        fig.colorbar(0.92, 0.2, 0.012, 0.6, "viridis", 0.0, vmax)
    alt = (f"Self-attention weights of each of {n} head(s) of your TransformerBlock, "
           + " and ".join(label for label, _ in rows) + "; with the causal mask everything above the "
           "diagonal must be zero (violations marked with crosses).")
    leaks = sum(int((np.triu(np.nan_to_num(m), 1) > 1e-6).sum()) for label, maps in rows if label == "causal mask"
                for m in maps if m is not None)
    cap = (f"Colour scale 0 to {vmax:.1f}. " + ("With the causal mask, no weight above the diagonal." if leaks == 0
           else f"With the causal mask, {leaks} weight(s) above the diagonal (crosses): the future is visible.")
           if any(label == "causal mask" for label, _ in rows) else f"Colour scale 0 to {vmax:.1f}.")
    return to_figure(fig, alt, cap)
