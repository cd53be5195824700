"""The report's drawing layer (harness/report/svg*.py): valid SVG and PNG, the colour tables, ticks, escaping."""
from __future__ import annotations

import base64
import math
import re
import struct
import zlib
from xml.dom.minidom import parseString

import numpy as np
import pytest

from harness.report import svg_base
from harness.report.svg import Canvas, data_uri


def _decode_png(raw: bytes) -> np.ndarray:
    """A minimal reader for what svg_base.png writes (8-bit RGB, filter 0), checking every chunk's CRC."""
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(raw):
        n, kind = struct.unpack(">I4s", raw[pos:pos + 8])
        data = raw[pos + 8:pos + 8 + n]
        (crc,) = struct.unpack(">I", raw[pos + 8 + n:pos + 12 + n])
        assert crc == zlib.crc32(kind + data) & 0xFFFFFFFF, kind
        chunks[kind] = chunks.get(kind, b"") + data
        pos += 12 + n
    w, h, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (depth, colour) == (8, 2) and b"IEND" in chunks
    rows = zlib.decompress(chunks[b"IDAT"])
    assert len(rows) == h * (1 + 3 * w)
    out = np.frombuffer(rows, dtype=np.uint8).reshape(h, 1 + 3 * w)
    assert (out[:, 0] == 0).all()
    return out[:, 1:].reshape(h, w, 3)


def test_png_round_trips_every_pixel():
    rgb = np.random.default_rng(0).integers(0, 256, size=(7, 5, 3), dtype=np.uint8)
    assert (_decode_png(svg_base.png(rgb)) == rgb).all()
    pil = pytest.importorskip("PIL.Image")
    import io
    assert (np.asarray(pil.open(io.BytesIO(svg_base.png(rgb))).convert("RGB")) == rgb).all()


def test_colour_tables_are_matplotlibs():
    """The tables were sampled from matplotlib once; a drawn map must keep its colours."""
    mpl = pytest.importorskip("matplotlib")
    for name in ("viridis", "cividis", "PuOr"):
        want = (mpl.colormaps[name](np.linspace(0, 1, 256))[:, :3] * 255).round().astype(np.uint8)
        assert (svg_base.lut(name) == want).all(), name


def test_colours_clip_and_grey_out_nan():
    m = np.array([[0.0, 1.0, -5.0, 7.0, np.nan, 0.5]])
    c = svg_base.colours(m, "viridis", 0.0, 1.0)[0]
    lut = svg_base.lut("viridis")
    assert (c[0] == lut[0]).all() and (c[1] == lut[255]).all()
    assert (c[2] == lut[0]).all() and (c[3] == lut[255]).all()       # out of range: clipped
    assert tuple(c[4]) == svg_base.BAD
    assert (c[5] == lut[128]).all()
    flat = svg_base.colours(np.ones((2, 2)), "cividis", 1.0, 1.0)      # vmin == vmax: no division by zero
    assert flat.shape == (2, 2, 3)


@pytest.mark.parametrize("lo,hi", [(0, 1), (-0.17, 0.37), (0, 2.565), (1e-5, 1e-3), (0.3, 0.31), (-0.5, 63.5),
                                   (0, 3e5), (-7, 0)])
def test_ticks_are_round_cover_the_range_and_read_distinctly(lo, hi):
    t = svg_base.nice_ticks(lo, hi)
    assert 2 <= len(t) <= 10
    assert all(lo - 1e-12 <= v <= hi + 1e-12 for v in t)
    step = t[1] - t[0]
    assert (hi - lo) / step <= 10 and t[0] - lo < step + 1e-12 and hi - t[-1] < step + 1e-12
    mant = step / 10 ** math.floor(math.log10(step) + 1e-9)
    assert min(abs(mant - c) for c in (1, 2, 5, 10)) < 1e-6            # 1, 2 or 5 times a power of ten
    labels = [svg_base.tick_label(v, t) for v in t]
    assert len(set(labels)) == len(labels), labels                       # enough decimals to tell them apart


def test_log_ticks_are_decades_or_fill_in_below_two():
    assert svg_base.log_ticks(1e-5, 2e-3) == pytest.approx([1e-5, 1e-4, 1e-3])
    assert svg_base.log_ticks(0.003, 0.02) == pytest.approx([0.005, 0.01, 0.02])


def _svg(fig: Canvas) -> str:
    text = fig.svg()
    assert parseString(text).documentElement.tagName == "svg"
    return text


def test_untrusted_labels_are_escaped():
    fig = Canvas(4, 3)
    ax = fig.axes(0.15, 0.15, 0.8, 0.7)
    evil = '</text><script>alert(1)</script>&"'
    ax.heat(np.eye(3), xt=[evil, "a", "b"], yt=["<", ">", "&"])
    ax.title(evil)
    ax.xlabel(evil)
    text = _svg(fig)
    assert "<script" not in text and "&lt;script&gt;" in text


def test_a_nan_breaks_a_line_and_log_axes_drop_non_positive_values():
    fig = Canvas(4, 3)
    ax = fig.axes(0.15, 0.15, 0.8, 0.7)
    ax.line([1, 2, 3, 4, 5], [1.0, 2.0, np.nan, 3.0, 4.0], "#000")
    ax.log_y()
    ax.line([1, 2, 3], [0.0, -1.0, 0.5], "#111")
    text = _svg(fig)
    paths = re.findall(r'<path d="([^"]+)" stroke="#000"', text)
    assert len(paths) == 1 and paths[0].count("M") == 2                 # two pieces, not one joined line
    assert not re.search(r'[ ="MLV H](-?nan|-?inf)', text.lower())      # no coordinate is nan or inf


def test_heatmap_is_an_embedded_png_of_the_cells():
    fig = Canvas(3, 3)
    ax = fig.axes(0.1, 0.1, 0.8, 0.8)
    m = np.array([[0.0, 1.0], [np.nan, 0.5]])
    ax.heat(m, cmap="cividis")
    text = _svg(fig)
    (uri,) = re.findall(r'xlink:href="data:image/png;base64,([^"]+)"', text)
    img = _decode_png(base64.b64decode(uri))
    k = img.shape[0] // 2                                                # each cell a k x k block
    assert img.shape[:2] == (2 * k, 2 * k)
    cells = img[::k, ::k]
    assert (cells == svg_base.colours(m, "cividis", 0.0, 1.0)).all()


def test_data_uri_is_base64_svg():
    fig = Canvas(2, 2)
    uri = data_uri(_svg(fig))
    assert uri.startswith("data:image/svg+xml;base64,")
    assert base64.b64decode(uri.split(",", 1)[1]).startswith(b"<svg ")
