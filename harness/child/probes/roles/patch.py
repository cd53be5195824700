"""The patch-embedding role (forward(x): images (N, C, H, W) -> (N, patches, E)): the output's shape; each output
token depends on its own patch's pixels alone, in raster order (one pixel of patch k perturbed: only token k moves,
k = row * (W / p) + column); examples of a batch stay apart. A wrong layout names the token that moved and the one
expected, and the statement that reshapes or permutes the image."""
from __future__ import annotations

import torch

from . import bounds
from .support import build, calls, diff, guarded, make, method, randn, run

LAYOUT_CALLS = ("permute", "transpose", "movedim", "swapaxes", "swapdims", "rearrange", "einsum")
SHAPING_CALLS = ("reshape", "view", "flatten", "unfold", "unflatten", "split", "chunk")


def sizes(rctx):
    """(N, C, image side, patch side, E) from the binding's shapes (its init's values as a fallback)."""
    s, i = rctx.binding.shapes, rctx.binding.init
    return (s.get("N", 2), s.get("C", i.get("in_channels", 3)), s.get("image", i.get("img_size", 16)),
            s.get("patch", i.get("patch_size", 4)), s.get("E", i.get("embed_dim", 8)))


def images(rctx, offset=0):
    n, c, side, _, _ = sizes(rctx)
    return randn(rctx, n, c, side, side, offset=offset + 1)


def forward(rctx, m, x):
    out = run(rctx, f"{rctx.binding.component}.forward", m, x)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"forward returned {type(out).__name__}, not a tensor")
    return out


def last_line(rctx) -> int | None:
    fwd = method(rctx, "forward")
    return fwd.body[-1].lineno if fwd is not None and fwd.body else None


def layout_line(rctx, kind: str | None) -> int | None:
    """The statement that lays the patches out: the one that permutes the image's axes (the wrong axes, the
    column order), or, for a reshape that never permutes (or where none permutes), the first that reshapes it."""
    fwd = method(rctx, "forward")
    moved, shaped = calls(fwd, *LAYOUT_CALLS), calls(fwd, *SHAPING_CALLS)
    if moved and kind != "no-permute":
        return moved[0].lineno
    return shaped[0].lineno if shaped else moved[0].lineno if moved else last_line(rctx)


@guarded("shape")
def shape(rctx):
    n, c, side, p, e = sizes(rctx)
    m = build(rctx)
    out = forward(rctx, m, images(rctx))
    want = (n, (side // p) ** 2, e)
    expected = f"({n}, {want[1]}, {e}): one token per {p} x {p} patch of a {side} x {side} image"
    if tuple(out.shape) == want:
        return [make(rctx, "shape", "pass", list(out.shape), expected)]
    text = f"the output's shape is {list(out.shape)}"
    return [make(rctx, "shape", "fail", str(list(out.shape)), expected, text,
                 {"mechanism": {"kind": "shape", "text": text}}, layout_line(rctx, "shape"))]


def pixel(k: int, c: int, p: int, g: int) -> tuple[int, int, int]:
    """One pixel of patch k (channel, row, column in the image): the position inside the patch and the channel
    vary with k, so that every in-patch offset and channel is met over the patches."""
    r, col = divmod(k, g)
    return k % c, r * p + (k * 3 + 1) % p, col * p + (k * 5 + 2) % p


def candidates(k: int, where: tuple[int, int, int], c: int, side: int, p: int, g: int) -> dict:
    """The token a pixel lands in under the layouts students write instead (by mechanism)."""
    ch, y, x = where
    return {"column-order": [(x // p) * g + y // p],
            "no-permute": [(ch * side * side + y * side + x) // (c * p * p)]}


@guarded("layout")
def layout(rctx):
    n, c, side, p, e = sizes(rctx)
    g = side // p
    m = build(rctx)
    x = images(rctx)
    base = forward(rctx, m, x)
    expected = "one pixel of patch k moves token k alone (k = row * (W / p) + column, raster order)"
    if base.dim() != 3 or base.shape[1] != g * g:
        return [make(rctx, "layout", "skip", detail=f"the output's shape {list(base.shape)} has no token per patch")]
    rows, wrong = [], []
    for k in range(g * g):
        ch, y, xx = pixel(k, c, p, g)
        x2 = x.clone()
        x2[:, ch, y, xx] += bounds.PERTURB
        moved = (forward(rctx, m, x2) - base).detach().abs().double().amax(dim=(0, 2)).cpu()
        tokens = [j for j in range(g * g) if float(moved[j]) > bounds.SAME]
        rows.append((k, (ch, y, xx), tokens))
        if tokens != [k]:
            wrong.append(rows[-1])
    if not wrong:
        return [make(rctx, "layout", "pass", f"{g * g} of {g * g} patches", expected)]
    named = [kind for kind in ("column-order", "no-permute")
             if all(t == candidates(k, w, c, side, p, g)[kind] for k, w, t in rows)]
    if named:
        kind = named[0]
    elif any(len(t) > 1 for _, _, t in wrong):
        kind = "several-tokens"
    elif any(not t for _, _, t in wrong):
        kind = "pixel-unused"
    else:
        kind = "wrong-token"
    k, (ch, y, xx), tokens = wrong[0]
    r, col = divmod(k, g)
    text = f"pixel (channel {ch}, row {y}, column {xx}) of patch {k} (grid row {r}, column {col}) moved " + \
        (f"token{'s' if len(tokens) > 1 else ''} {', '.join(map(str, tokens))}" if tokens else "no token") + \
        f" where token {k} alone should move; {len(wrong)} of {g * g} patches land elsewhere" + \
        {"column-order": ": the patches are numbered column by column (the grid's axes swapped)",
         "no-permute": ": the image is reshaped without moving the channel axis last (each token a run of one "
                       "channel's rows, not a patch)"}.get(kind, "")
    return [make(rctx, "layout", "fail", {"patch": k, "moved": tokens, "expected": k}, expected, text,
                 {"mechanism": {"kind": kind, "text": text, "patch": k, "moved": tokens, "expected": k,
                                "wrong": len(wrong), "patches": g * g}}, layout_line(rctx, kind))]


@guarded("batch")
def batch(rctx):
    n, c, side, p, e = sizes(rctx)
    m = build(rctx)
    x = randn(rctx, max(n, 2), c, side, side, offset=3)
    base = forward(rctx, m, x)
    x2 = x.clone()
    x2[1] += bounds.PERTURB
    d = diff(forward(rctx, m, x2)[0], base[0])
    st = "pass" if d <= bounds.SAME else "fail"
    return [make(rctx, "batch", st, d, f"changing image 1 moves example 0's tokens by <= {bounds.SAME}",
                 "" if st == "pass" else "the examples of a batch mix (a reshape across the batch axis)",
                 {"mechanism": {"kind": "batch-mixed"}} if st == "fail" else {},
                 layout_line(rctx, None) if st == "fail" else None)]


PROBES_SPEC = (("shape", shape, "quick"), ("layout", layout, "quick"), ("batch", batch, "quick"))
