"""The report's drawing primitives (see svg.py): colour tables, a PNG encoder, ticks, escaped text."""
from __future__ import annotations

import base64
import math
import struct
import zlib
from html import escape

import numpy as np

from .colormaps import TABLES

DPI = 100
PT = DPI / 72                    # px per point: font sizes are the old figures' points
FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
SIZE, TICK, TITLE = 8.5 * PT, 7.5 * PT, 9 * PT
BAD = (0xd9, 0xd9, 0xd9)         # nan cells
DASH = {"-": None, "--": "5,3", ":": "1.2,2.4", "-.": "5,2,1.2,2"}
_LUTS: dict[str, np.ndarray] = {}


def esc(s) -> str:
    return escape(str(s), quote=True)


def f1(v: float) -> str:
    return f"{v:.1f}"


def lut(name: str) -> np.ndarray:
    """(256, 3) uint8 colour table of one of colormaps.NAMES."""
    if name not in _LUTS:
        h = "".join(TABLES[name])
        _LUTS[name] = np.frombuffer(bytes.fromhex(h), dtype=np.uint8).reshape(256, 3)
    return _LUTS[name]


def png(rgb: np.ndarray) -> bytes:
    """A (h, w, 3) uint8 array as PNG bytes (8-bit RGB, no filtering): enough for flat heatmap cells."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[i].tobytes() for i in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def png_uri(rgb: np.ndarray) -> str:
    return "data:image/png;base64," + base64.b64encode(png(np.ascontiguousarray(rgb))).decode("ascii")


def colours(m: np.ndarray, cmap: str, vmin: float, vmax: float) -> np.ndarray:
    """Matrix -> (rows, cols, 3) uint8 through a colour table; nan -> grey."""
    span = (vmax - vmin) or 1.0
    with np.errstate(invalid="ignore"):
        idx = np.clip(np.nan_to_num((m - vmin) / span, nan=0.0) * 255, 0, 255).round().astype(np.int64)
    out = lut(cmap)[idx]
    out[~np.isfinite(m)] = BAD
    return out


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round values (1, 2 or 5 times a power of ten) covering [lo, hi], about n of them."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    e = math.floor(math.log10((hi - lo) / max(1, n)))
    # the round step whose tick count is nearest n (at least two ticks)
    steps = [c * 10.0 ** k for k in (e - 1, e, e + 1) for c in (1, 2, 5) if (hi - lo) / (c * 10.0 ** k) >= 1.5]
    step = min(steps or [10.0 ** e], key=lambda st: abs((hi - lo) / st - n))
    first = math.ceil(lo / step - 1e-9) * step
    return [round(first + i * step, 12) for i in range(int((hi - first) / step + 1e-9) + 1)]


def tick_label(v: float, ticks: list[float]) -> str:
    """A tick's text, with as many decimals as the step needs; e-notation when the axis is tiny or huge."""
    big = max((abs(t) for t in ticks), default=abs(v))
    if big >= 1e5 or 0 < big < 1e-2:
        if v == 0:
            return "0"
        mant, exp = f"{v:.2e}".split("e")
        return f"{mant.rstrip('0').rstrip('.')}e{int(exp)}"
    step = min((b - a for a, b in zip(ticks, ticks[1:])), default=1.0) or 1.0
    nd = next((d for d in range(10) if abs(round(step, d) - step) <= 1e-9 * step), 10)   # as many as the step has
    return f"{v:.{nd}f}"


def log_ticks(lo: float, hi: float) -> list[float]:
    """Powers of ten in [lo, hi]; with fewer than two, 2x and 5x as well."""
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    dec = [10.0 ** k for k in range(a, b + 1) if lo <= 10.0 ** k <= hi * (1 + 1e-9)]
    if len(dec) >= 2:
        return dec
    return [m * 10.0 ** k for k in range(a, b + 1) for m in (1, 2, 5) if lo <= m * 10.0 ** k <= hi * (1 + 1e-9)]


def text_width(s: str, size: float) -> float:
    return 0.58 * size * max((len(line) for line in str(s).split("\n")), default=0)


def text(x, y, s, size=SIZE, anchor="start", colour="#222", weight="normal", rotate=False, baseline="auto") -> str:
    """One <text>; "\n" starts a new line (each line 1.2 em below the last)."""
    lines = str(s).split("\n")
    rot = f' transform="rotate(-90 {f1(x)} {f1(y)})"' if rotate else ""
    base = "" if baseline == "auto" else f' dominant-baseline="{baseline}"'
    spans = "".join(f'<tspan x="{f1(x)}" dy="{0 if i == 0 else 1.2}em">{esc(t)}</tspan>'
                    for i, t in enumerate(lines))
    return (f'<text x="{f1(x)}" y="{f1(y)}" font-size="{size:.1f}" text-anchor="{anchor}" fill="{colour}" '
            f'font-weight="{weight}"{base}{rot}>{spans}</text>')
