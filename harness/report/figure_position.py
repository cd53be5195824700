"""The report's positional-encoding picture: the student's table beside the formula and the difference."""
from __future__ import annotations

import numpy as np

from .figure_common import Figure, FigureError, heat, matrix, new_figure, to_figure


# -- positional encoding ----------------------------------------------------------------------------

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
    grid = fig.grid(1, len(panels), left=0.6 / width, right=1 - 0.4 / width, bottom=0.15, top=0.9, wspace=0.45)
    for i, (m, title, cmap, lo, hi) in enumerate(panels):
        left, bottom, w, h = grid[(0, i)]
        ax = fig.axes(left, bottom, w * 0.9, h)                 # each panel with its own colour bar
        heat(ax, m, cmap=cmap, vmin=lo, vmax=hi, title=title)
        ax.xlabel("dimension")
        if i == 0:
            ax.ylabel("position")
        fig.colorbar(left + w * 0.93, bottom, w * 0.035, h, cmap, lo, hi)
    alt = (f"Heatmap of your positional-encoding table, {t.shape[0]} positions by {t.shape[1]} dimensions, "
           "values from -1 to 1" + (f"; beside it the formula and the difference, largest "
                                     f"{float(np.nanmax(np.abs(d))):.3f}" if d is not None else
                                     "; it matches the formula") + ".")
    cap = "matches the formula" if d is None else \
        f"differs from the formula by up to {float(np.nanmax(np.abs(d))):.3f}"
    return to_figure(fig, alt, cap)
