"""One axes of a report figure as SVG: what to draw, its limits and ticks, the labels and the legend (see svg.py)."""
from __future__ import annotations

import math

import numpy as np

from .svg_base import (
    DASH,
    PT,
    SIZE,
    TICK,
    TITLE,
    colours,
    f1,
    log_ticks,
    nice_ticks,
    png_uri,
    text,
    text_width,
    tick_label,
)

LEGEND = 7.5 * PT
INK = "#333"


class Axes:
    def __init__(self, n: int, x: float, y: float, w: float, h: float):
        self.n, self.x, self.y, self.w, self.h = n, x, y, w, h        # n: its clip path's id; the box in px
        self.items: list[tuple] = []
        self.xlim: tuple[float, float] | None = None   # explicit limits; else from the data
        self.ylim: tuple[float, float] | None = None
        self.ylo: float | None = None                   # one side fixed (set_ylim(bottom=0))
        self.yhi: float | None = None
        self.logy = False
        self.is_heat = False
        self.xt: list[tuple[int, str]] | None = None   # [(position, label)] for a heatmap's categories
        self.yt: list[tuple[int, str]] | None = None
        self.labels = {"title": "", "x": "", "y": ""}
        self.legend_loc: str | None = None
        self.gridlines = False
        self.frame = True
        self.yticks_on = True

    # -- what to draw -----------------------------------------------------------------------------
    def line(self, xs, ys, colour, lw=1.4, ls="-", alpha=1.0, label=None, marker=None):
        self.items.append(("line", np.asarray(xs, float), np.asarray(ys, float),
                           dict(colour=colour, lw=lw, ls=ls, alpha=alpha, label=label, marker=marker)))

    def scatter(self, xs, ys, colour, marker="o", size=3.0, alpha=1.0, label=None):
        self.items.append(("scatter", np.asarray(xs, float), np.asarray(ys, float),
                           dict(colour=colour, marker=marker, size=size, alpha=alpha, label=label)))

    def hline(self, y, colour, lw=1.0, ls="-", label=None):
        self.items.append(("hline", y, None, dict(colour=colour, lw=lw, ls=ls, label=label)))

    def vline(self, x, colour, lw=1.0, ls="-", label=None):
        self.items.append(("vline", x, None, dict(colour=colour, lw=lw, ls=ls, label=label)))

    def vspan(self, x0, x1, colour, alpha=0.35, label=None):
        self.items.append(("vspan", x0, x1, dict(colour=colour, alpha=alpha, label=label)))

    def bars(self, edges, heights, colour, alpha=0.9, label=None):
        self.items.append(("bars", np.asarray(edges, float), np.asarray(heights, float),
                           dict(colour=colour, alpha=alpha, label=label)))

    def text(self, x, y, s, coords=("data", "data"), anchor="start", size=7 * PT, colour="#777", baseline="auto"):
        self.items.append(("text", (x, y), s, dict(coords=coords, anchor=anchor, size=size, colour=colour,
                                                   baseline=baseline)))

    def heat(self, m: np.ndarray, cmap="viridis", vmin=0.0, vmax=1.0, xt=None, yt=None, yticks=True):
        """A matrix, row 0 at the top; categorical ticks (labels xt/yt or indices) up to 24 per axis."""
        rows, cols = m.shape
        self.is_heat, self.frame = True, False
        self.xlim, self.ylim = (-0.5, cols - 0.5), (rows - 0.5, -0.5)
        self.xt = self._categories(cols, xt)
        self.yt = self._categories(rows, yt) if yticks else []
        self.items.append(("image", colours(m, cmap, vmin, vmax), None, {}))

    @staticmethod
    def _categories(n: int, labels) -> list[tuple[int, str]] | None:
        if n > 24:
            return None                                   # too many to label: round indices
        labels = [str(t) for t in (labels or [])][:n]
        return [(i, labels[i] if i < len(labels) else ("" if labels else str(i))) for i in range(n)]

    def title(self, s): self.labels["title"] = s
    def xlabel(self, s): self.labels["x"] = s
    def ylabel(self, s): self.labels["y"] = s
    def legend(self, loc="upper right"): self.legend_loc = loc
    def grid(self): self.gridlines = True
    def log_y(self): self.logy = True
    def off(self): self.frame, self.xt, self.yt, self.yticks_on = False, [], [], False

    def set_ylim(self, bottom=None, top=None):
        self.ylo, self.yhi = bottom, top

    def set_xlim(self, left, right):
        self.xlim = (left, right)

    # -- limits and coordinates -------------------------------------------------------------------
    def _limits(self):
        if self.xlim is not None and self.ylim is not None:
            return self.xlim, self.ylim
        xs: list[np.ndarray] = []
        ys: list[np.ndarray] = []
        for kind, a, b, _ in self.items:
            if kind in ("line", "scatter"):
                xs.append(a)
                ys.append(b)
            elif kind == "bars":
                xs.append(a)
                ys += [b, np.zeros(1)]
            elif kind == "hline":
                ys.append(np.array([a], float))
            elif kind in ("vline", "vspan"):
                xs.append(np.array([a] + ([b] if b is not None else []), float))
        x = np.concatenate(xs) if xs else np.zeros(0)
        y = np.concatenate(ys) if ys else np.zeros(0)
        x, y = x[np.isfinite(x)], y[np.isfinite(y)]
        if self.logy:
            y = y[y > 0]
        xlim = self.xlim or _span(x, bars=any(k == "bars" for k, *_ in self.items))
        if self.logy:
            lo, hi = _span(np.log10(y)) if y.size else (-1.0, 0.0)
            ylim = (10 ** lo, 10 ** hi)
        else:
            ylim = _span(y)
        if any(k == "bars" for k, *_ in self.items) and y.size and y.min() >= 0:
            ylim = (0.0, ylim[1])                      # a histogram stands on zero, as matplotlib's does
        ylim = (self.ylo if self.ylo is not None else ylim[0], self.yhi if self.yhi is not None else ylim[1])
        if ylim[1] <= ylim[0]:
            ylim = (ylim[0], ylim[0] + 1)
        return xlim, self.ylim or ylim

    def _tx(self, v, xlim):
        return self.x + (v - xlim[0]) / ((xlim[1] - xlim[0]) or 1) * self.w

    def _ty(self, v, ylim):
        if self.logy:
            with np.errstate(divide="ignore", invalid="ignore"):
                v = np.log10(np.where(np.asarray(v, float) > 0, v, np.nan))
            ylim = (math.log10(ylim[0]), math.log10(ylim[1]))
        return self.y + self.h - (v - ylim[0]) / ((ylim[1] - ylim[0]) or 1) * self.h

    # -- SVG --------------------------------------------------------------------------------------
    def render(self) -> str:
        return render_axes(self)



def _span(v: np.ndarray, bars: bool = False) -> tuple[float, float]:
    """Data range with matplotlib's 5% margins (none for a histogram's x); a flat range widened by 1."""
    if not v.size:
        return (0.0, 1.0)
    lo, hi = float(v.min()), float(v.max())
    if hi == lo:
        return (lo - 1, hi + 1)
    pad = 0.0 if bars else 0.05 * (hi - lo)
    return (lo - pad, hi + pad)



def _stroke(colour, lw, ls="-", alpha=1.0) -> str:
    dash = DASH.get(ls)
    return (f'stroke="{colour}" stroke-width="{lw * PT:.2f}" fill="none"'
            + (f' stroke-dasharray="{dash}"' if dash else "") + (f' stroke-opacity="{alpha:g}"' if alpha < 1 else ""))


def _path(px: np.ndarray, py: np.ndarray) -> str:
    """Polyline path; a nan breaks the line, as in matplotlib."""
    out, pen = [], False
    for x, y in zip(px.tolist(), py.tolist()):
        if math.isfinite(x) and math.isfinite(y):
            out.append(f"{'L' if pen else 'M'}{x:.1f} {y:.1f}")
            pen = True
        else:
            pen = False
    return "".join(out)


def _linear_ticks(ax, lim) -> list[tuple[float, str]]:
    vals = nice_ticks(*sorted(lim))
    if ax.is_heat:                      # a heatmap's axis counts cells: whole indices only
        vals = [v for v in vals if float(v).is_integer()]
    return [(v, tick_label(v, vals)) for v in vals]


def _ticks(ax, xlim, ylim):
    """(x ticks, y ticks) as [(value, label)]: a heatmap's categories, decades on a log axis, else round values."""
    xt = ax.xt if ax.xt is not None else _linear_ticks(ax, xlim)
    if ax.yt is not None:
        yt = ax.yt
    elif ax.logy:
        yt = [(v, _power(v)) for v in log_ticks(*ylim)]
    else:
        yt = _linear_ticks(ax, ylim)
    return xt, (yt if ax.yticks_on else [])


SUPER = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079")


def _power(v: float) -> str:
    """10^k as 10 with a superscript exponent; 2x and 5x as 2e-3."""
    k = math.log10(v)
    if abs(k - round(k)) < 1e-9:
        return "10" + str(round(k)).translate(SUPER)
    return f"{v:.0e}".replace("e-0", "e-").replace("e+0", "e")


def _heat_image(ax, rgb: np.ndarray) -> str:
    rows, cols, _ = rgb.shape
    # upscale so each cell is a block of pixels: the browser's smoothing then only touches the cell edges
    k = max(1, min(12, math.ceil(max(ax.w / cols, ax.h / rows))))
    while k > 1 and rows * cols * k * k > 600_000:
        k -= 1
    uri = png_uri(np.repeat(np.repeat(rgb, k, axis=0), k, axis=1))
    return (f'<image x="{f1(ax.x)}" y="{f1(ax.y)}" width="{f1(ax.w)}" height="{f1(ax.h)}" '
            f'preserveAspectRatio="none" style="image-rendering:pixelated" xlink:href="{uri}"/>')


def _artist(ax, item, xlim, ylim) -> str:
    kind, a, b, st = item
    if kind == "image":
        return _heat_image(ax, a)
    if kind == "line":
        px, py = ax._tx(a, xlim), ax._ty(b, ylim)
        d = _path(px, py)
        out = f'<path d="{d}" {_stroke(st["colour"], st["lw"], st["ls"], st["alpha"])}/>' if d else ""
        if st.get("marker"):
            out += "".join(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{1.3 * PT:.1f}" fill="{st["colour"]}"/>'
                           for x, y in zip(px.tolist(), py.tolist()) if math.isfinite(x) and math.isfinite(y))
        return out
    if kind == "scatter":
        px, py = ax._tx(a, xlim), ax._ty(b, ylim)
        pts = [(x, y) for x, y in zip(px.tolist(), py.tolist()) if math.isfinite(x) and math.isfinite(y)]
        r = st["size"]
        if st["marker"] == "x":
            d = "".join(f"M{x - r:.1f} {y - r:.1f}L{x + r:.1f} {y + r:.1f}M{x - r:.1f} {y + r:.1f}L{x + r:.1f} {y - r:.1f}"
                        for x, y in pts)
            return f'<path d="{d}" {_stroke(st["colour"], 1.2)}/>' if d else ""
        op = f' fill-opacity="{st["alpha"]:g}"' if st["alpha"] < 1 else ""
        return (f'<g fill="{st["colour"]}"{op}>'
                + "".join(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}"/>' for x, y in pts) + "</g>")
    if kind == "hline":
        y = float(ax._ty(np.array([a], float), ylim)[0])
        return "" if not math.isfinite(y) else \
            f'<line x1="{f1(ax.x)}" y1="{f1(y)}" x2="{f1(ax.x + ax.w)}" y2="{f1(y)}" {_stroke(st["colour"], st["lw"], st["ls"])}/>'
    if kind == "vline":
        x = ax._tx(a, xlim)
        return f'<line x1="{f1(x)}" y1="{f1(ax.y)}" x2="{f1(x)}" y2="{f1(ax.y + ax.h)}" {_stroke(st["colour"], st["lw"], st["ls"])}/>'
    if kind == "vspan":
        x0, x1 = sorted((ax._tx(a, xlim), ax._tx(b, xlim)))
        return (f'<rect x="{f1(x0)}" y="{f1(ax.y)}" width="{f1(x1 - x0)}" height="{f1(ax.h)}" fill="{st["colour"]}" '
                f'fill-opacity="{st["alpha"]:g}"/>')
    if kind == "bars":
        y0 = float(ax._ty(np.array([0.0]), ylim)[0])
        rects = []
        for left, right, hgt in zip(a[:-1].tolist(), a[1:].tolist(), b.tolist()):
            if hgt > 0:
                x0, x1 = ax._tx(left, xlim), ax._tx(right, xlim)
                y1 = float(ax._ty(np.array([hgt]), ylim)[0])
                rects.append(f'<rect x="{f1(x0)}" y="{f1(y1)}" width="{f1(max(x1 - x0, 0.5))}" height="{f1(y0 - y1)}"/>')
        return f'<g fill="{st["colour"]}" fill-opacity="{st["alpha"]:g}">' + "".join(rects) + "</g>"
    if kind == "text":
        (x, y), s = a, b
        px = ax.x + x * ax.w if st["coords"][0] == "axes" else ax._tx(x, xlim)
        py = ax.y + (1 - y) * ax.h if st["coords"][1] == "axes" else float(ax._ty(np.array([y], float), ylim)[0])
        return text(px, py, s, size=st["size"], anchor=st["anchor"], colour=st["colour"], baseline=st["baseline"])
    return ""


def _legend(ax) -> str:
    entries = [(it[3]["label"], it) for it in ax.items if it[3].get("label")]
    if not entries or ax.legend_loc is None:
        return ""
    rowh, sample = LEGEND * 1.4, 22.0
    widths = [sample + 6 + text_width(label, LEGEND) for label, _ in entries]
    if ax.legend_loc == "above":                                   # outside the top edge, two columns
        ncol = 2
        colw = max(widths) + 12
        x0, y0 = ax.x, ax.y - rowh * math.ceil(len(entries) / ncol) - 4
        boxw = colw * ncol
    else:
        ncol, colw = 1, max(widths) + 8
        boxw, boxh = colw, rowh * len(entries) + 4
        vert, horiz = ax.legend_loc.split(" ") if " " in ax.legend_loc else ("center", ax.legend_loc)
        x0 = ax.x + 6 if horiz == "left" else ax.x + ax.w - boxw - 4
        y0 = {"upper": ax.y + 4, "lower": ax.y + ax.h - boxh - 4}.get(vert, ax.y + (ax.h - boxh) / 2)
    out = [] if ax.legend_loc == "above" else \
        [f'<rect x="{f1(x0)}" y="{f1(y0)}" width="{f1(boxw)}" height="{f1(rowh * len(entries) + 4)}" fill="white" '
         'fill-opacity="0.8"/>']
    for i, (label, (kind, _, _, st)) in enumerate(entries):
        cx, cy = x0 + 4 + (i % ncol) * colw, y0 + 2 + (i // ncol + 0.5) * rowh
        if kind in ("line", "hline", "vline"):
            out.append(f'<line x1="{f1(cx)}" y1="{f1(cy)}" x2="{f1(cx + sample)}" y2="{f1(cy)}" '
                       f'{_stroke(st["colour"], st["lw"], st["ls"], st.get("alpha", 1.0))}/>')
        elif kind == "scatter":
            out.append(f'<circle cx="{f1(cx + sample / 2)}" cy="{f1(cy)}" r="3" fill="{st["colour"]}"/>')
        else:
            out.append(f'<rect x="{f1(cx)}" y="{f1(cy - 4)}" width="{f1(sample)}" height="8" fill="{st["colour"]}" '
                       f'fill-opacity="{st["alpha"]:g}"/>')
        out.append(text(cx + sample + 5, cy, label, size=LEGEND, baseline="central", colour=INK))
    return "".join(out)


def render_axes(ax) -> str:
    xlim, ylim = ax._limits()
    xt, yt = _ticks(ax, xlim, ylim)
    clip = f"clip{ax.n}"
    out = [f'<clipPath id="{clip}"><rect x="{f1(ax.x)}" y="{f1(ax.y)}" width="{f1(ax.w)}" height="{f1(ax.h)}"/></clipPath>']
    lo_x, hi_x = sorted(xlim)
    in_x = [(v, s) for v, s in xt if lo_x - 1e-9 <= v <= hi_x + 1e-9]
    lo_y, hi_y = sorted(ylim)
    in_y = [(v, s) for v, s in yt if lo_y * (1 - 1e-9) - 1e-12 <= v <= hi_y * (1 + 1e-9) + 1e-12]
    if ax.gridlines:
        g = 'stroke="#000" stroke-opacity="0.12" stroke-width="0.7"'
        out += [f'<line x1="{f1(ax._tx(v, xlim))}" y1="{f1(ax.y)}" x2="{f1(ax._tx(v, xlim))}" y2="{f1(ax.y + ax.h)}" {g}/>'
                for v, _ in in_x]
        out += [f'<line x1="{f1(ax.x)}" y1="{f1(y)}" x2="{f1(ax.x + ax.w)}" y2="{f1(y)}" {g}/>'
                for y in (float(ax._ty(np.array([v], float), ylim)[0]) for v, _ in in_y)]
    out.append(f'<g clip-path="url(#{clip})">' + "".join(_artist(ax, it, xlim, ylim) for it in ax.items) + "</g>")
    if ax.frame:
        out.append(f'<path d="M{f1(ax.x)} {f1(ax.y)}V{f1(ax.y + ax.h)}H{f1(ax.x + ax.w)}" stroke="{INK}" '
                   'stroke-width="0.8" fill="none"/>')
    bottom = ax.y + ax.h
    for v, s in in_x:
        x = ax._tx(v, xlim)
        out.append(f'<line x1="{f1(x)}" y1="{f1(bottom)}" x2="{f1(x)}" y2="{f1(bottom + 3)}" stroke="{INK}" stroke-width="0.8"/>')
        if s:
            out.append(text(x, bottom + 4, s, size=TICK, anchor="middle", colour=INK, baseline="hanging"))
    label_w = 0.0
    for v, s in in_y:
        y = float(ax._ty(np.array([v], float), ylim)[0])
        out.append(f'<line x1="{f1(ax.x - 3)}" y1="{f1(y)}" x2="{f1(ax.x)}" y2="{f1(y)}" stroke="{INK}" stroke-width="0.8"/>')
        if s:
            out.append(text(ax.x - 5, y, s, size=TICK, anchor="end", colour=INK, baseline="central"))
            label_w = max(label_w, text_width(s, TICK))
    lab = ax.labels
    if lab["x"]:
        dy = 6 + (TICK * 1.2 if any(s for _, s in in_x) else 0)
        out.append(text(ax.x + ax.w / 2, bottom + dy, lab["x"], size=SIZE, anchor="middle", colour=INK,
                        baseline="hanging"))
    if lab["y"]:
        out.append(text(ax.x - 9 - label_w, ax.y + ax.h / 2, lab["y"], size=SIZE, anchor="middle", colour=INK,
                        rotate=True))
    if lab["title"]:
        n = lab["title"].count("\n")
        out.append(text(ax.x + ax.w / 2, ax.y - 5 - n * TITLE * 1.2, lab["title"], size=TITLE, anchor="middle",
                        colour="#111"))
    out.append(_legend(ax))
    return "".join(out)

