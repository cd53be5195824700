"""Properties every correct implementation of an `lm` model component has, whatever its style.

Each check runs the student's adapter on inputs built for it and returns a measurement:
{id, component, what, measured, expected, passed, cause, confidence}. `cause` names what a
failure means when the measurement shows the mechanism itself (which coordinate pairs RoPE
mixes, the factor the scores are scaled by, the weight a masked key gets); a failure that
shows only a symptom gets a generic cause at lower confidence. A check whose call raises is
skipped (None): a failed measurement is never evidence. Training-side components (loss,
optimizer, schedule, clipping, batches) are in properties_train.py; the measuring itself (run,
prop, the causal dependency map) in measure.py.
"""
from __future__ import annotations

import itertools
import math

import torch

from .inputs import block_weights, lm_weights, LM_CONFIG
from .measure import causal_prop, dependency, prop, run, Skip


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


def _close(a, b, tol=1e-4):
    if a.shape != b.shape or not bool(torch.isfinite(a).all()):
        return False
    return float((a - b).abs().max()) <= tol * (1 + float(b.abs().max()))


# --------------------------------------------------------------------------- RoPE

def rope_props(fn):
    d, theta, out = 16, 10000.0, []
    g = _g(1)
    x = torch.randn(2, 6, d, generator=g)
    zero = torch.zeros(6, dtype=torch.long)            # 1-D positions, as the course's interface is called
    y0 = run(fn, d, theta, 32, x, zero)
    err = float((y0 - x.double()).abs().max())
    # sin and cos swapped: at position 0 every pair is turned by 90 degrees, (x1, x2) -> (-x2, x1)
    quarter = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2).double()
    swapped = float((y0 - quarter).abs().max()) < 1e-5
    out.append(prop("rope-identity-at-0", "rope", "RoPE at position 0 leaves the vector unchanged", err, "0 (< 1e-5)",
                    err < 1e-5, "rope-sin-cos-swapped" if swapped else "rope-rotates-at-position-0",
                    0.9 if swapped else 0.7))
    pos = torch.tensor([5, 6, 9, 10, 11, 20])
    y = run(fn, d, theta, 32, x, pos)
    norm = float((y.norm(dim=-1) - x.double().norm(dim=-1)).abs().max())
    out.append(prop("rope-norm-preserving", "rope", "every vector keeps its norm (a rotation)", norm, "< 1e-4",
                    norm < 1e-4, "rope-not-a-rotation", 0.7))
    ya = run(fn, d, theta, 32, x, torch.arange(6))
    same = float((y - ya).abs().max())
    out.append(prop("rope-uses-token-positions", "rope", "outputs change when token_positions change (offset, gaps) "
                    "with the same tensor", same, "> 1e-3", same > 1e-3, "rope-ignores-token-positions", 0.9))
    # e_0 at position 3: an interleaved rotation mixes coordinates (0, 1) only
    e0 = torch.zeros(1, 1, d)
    e0[..., 0] = 1.0
    r = run(fn, d, theta, 32, e0, torch.tensor([3]))[0, 0]
    mixed = sorted(int(i) for i in torch.nonzero(r.abs() > 1e-6).flatten())
    pairs_ok = set(mixed) <= {0, 1}                   # (no rotation at all is the frequencies' problem)
    halves = mixed == [0, d // 2]
    out.append(prop("rope-pairs", "rope", "a rotation of e_0 stays in the pair (x[0], x[1])", mixed, "[0, 1]", pairs_ok,
                    "rope-halves-not-pairs" if halves else "rope-pairs-wrong", 0.9 if halves else 0.6))
    if pairs_ok:
        angles = []
        for k in range(d // 2):
            e = torch.zeros(1, 1, d)
            e[..., 2 * k] = 1.0
            rk = run(fn, d, theta, 32, e, torch.tensor([1]))[0, 0]
            angles.append(math.atan2(float(rk[2 * k + 1]), float(rk[2 * k])))
        a = torch.tensor(angles, dtype=torch.float64)
        k = torch.arange(d // 2, dtype=torch.float64)
        want = theta ** (-2 * k / d)
        err = float((a - want).abs().max())
        cause, conf = "rope-frequencies-wrong", 0.6
        if float((a + want).abs().max()) < 1e-4:
            cause, conf = "rope-rotation-reversed", 0.9
        elif float((a - theta ** (-k / d)).abs().max()) < 1e-4:
            cause, conf = "rope-frequency-exponent", 0.9
        out.append(prop("rope-frequencies", "rope", "angle of pair k at position 1 is theta^(-2k/d)",
                        [round(v, 5) for v in angles[:3]], [round(float(v), 5) for v in want[:3]], err < 1e-4,
                        cause, conf))
    # relative: q_m . k_n depends only on m - n
    q, kk = torch.randn(1, 1, d, generator=g), torch.randn(1, 1, d, generator=g)
    dots = []
    for m, n in ((2, 0), (7, 5), (13, 11), (25, 23)):
        qm = run(fn, d, theta, 32, q, torch.tensor([m]))
        kn = run(fn, d, theta, 32, kk, torch.tensor([n]))
        dots.append(float((qm * kn).sum()))
    spread = max(dots) - min(dots)
    out.append(prop("rope-relative", "rope", "q_m . k_n is the same for (m, n) = (2, 0), (7, 5), (13, 11), (25, 23)",
                    spread, "< 1e-4", spread < 1e-4 * (1 + abs(dots[0])), "rope-not-relative", 0.6))
    return out


# --------------------------------------------------------------------------- RMSNorm

def rmsnorm_props(fn):
    d, eps, out = 16, 1e-5, []
    g = _g(2)
    w = 1 + 0.3 * torch.randn(d, generator=g)
    ones = torch.ones(d)
    x = torch.randn(1, 3, d, generator=g) * 3 + 0.5     # (batch, seq, d) as the course's tests
    y = run(fn, d, eps, w, x)
    const = run(fn, d, eps, ones, torch.full((1, 1, d), 2.0))
    centred = not bool(torch.isfinite(const).all()) or float(const.abs().max()) < 1e-3
    zm = x - x.mean(-1, keepdim=True)
    rms = float(run(fn, d, eps, ones, zm).pow(2).mean(-1).sqrt().mean())
    bessel = abs(rms - math.sqrt((d - 1) / d)) < 1e-3
    out.append(prop("rmsnorm-no-centring", "rmsnorm", "a constant vector (2, ..., 2) normalises to ones (no mean "
                    "subtraction)", [round(float(v), 4) for v in const.flatten()[:3]], "[1.0, 1.0, 1.0]", not centred,
                    "rmsnorm-uses-std" if bessel else "rmsnorm-subtracts-mean", 0.85))
    if not centred:
        out.append(prop("rmsnorm-unit-rms", "rmsnorm", "output / gain has unit RMS for a zero-mean row", rms, "1.0",
                        abs(rms - 1) < 1e-3, "rmsnorm-uses-std" if bessel else "rmsnorm-scale-wrong", 0.7))
    y1 = run(fn, d, eps, ones, x)
    ratio = y / y1
    gain_err = float((ratio - w.double()).abs().max()) if bool(torch.isfinite(ratio).all()) else math.inf
    gain_first = (x.double() * w.double())
    gain_first = gain_first / torch.sqrt(gain_first.pow(2).mean(-1, keepdim=True) + eps)
    cause = "rmsnorm-gain-ignored" if float((y - y1).abs().max()) < 1e-6 else (
        "rmsnorm-gain-before-normalising" if _close(y, gain_first) else "rmsnorm-gain-wrong")
    out.append(prop("rmsnorm-gain", "rmsnorm", "output with gain g is g times the output with gain 1", gain_err,
                    "< 1e-4", gain_err < 1e-4, cause, 0.9 if cause != "rmsnorm-gain-wrong" else 0.6))
    inv = float((run(fn, d, eps, w, x * 10) - y).abs().max())
    # 1e-3: eps moves a correct RMSNorm by eps / mean(x^2) ~ 1e-6 here; a symptom only, so low confidence
    out.append(prop("rmsnorm-scale-invariant", "rmsnorm", "RMSNorm(10 x) = RMSNorm(x) at activations ~3", inv, "< 1e-3",
                    inv < 1e-3, "rmsnorm-not-scale-invariant", 0.5))
    batch = torch.randn(4, 5, d, generator=g)
    other = batch.clone()
    other[1:] = other[1:] * 5 + 1
    ind = float((run(fn, d, eps, w, batch)[0] - run(fn, d, eps, w, other)[0]).abs().max())
    out.append(prop("rmsnorm-token-independent", "rmsnorm", "a token's output does not change when other rows of the "
                    "batch change", ind, "< 1e-6", ind < 1e-6, "rmsnorm-wrong-axis", 0.85))
    small = torch.randn(1, 3, d, generator=g) * 1e-3
    ys = run(fn, d, eps, w, small)
    ms = small.double().pow(2).mean(-1, keepdim=True)
    inside = small.double() / torch.sqrt(ms + eps) * w.double()
    outside = small.double() / (torch.sqrt(ms) + eps) * w.double()
    e_in = float((ys - inside).abs().max())
    out.append(prop("rmsnorm-eps-inside-root", "rmsnorm", "at activations ~1e-3: x / sqrt(mean(x^2) + eps) * g", e_in,
                    "< 1e-4", e_in < 1e-4, "rmsnorm-eps-outside-sqrt" if _close(ys, outside) else "rmsnorm-eps-wrong",
                    0.9 if _close(ys, outside) else 0.6))
    # bfloat16 has float32's range: 1e18 (x^2 = 1e36) stays finite with or without the upcast, 1e20 overflows both
    for dtype, scale in ((torch.float16, 400.0), (torch.bfloat16, 1e18)):
        try:
            yh = run(fn, d, eps, w.to(dtype), (x * scale).to(dtype))
        except Skip:
            continue
        fin = bool(torch.isfinite(yh).all()) and float(yh.abs().max()) > 1e-3
        name = str(dtype)[6:]
        out.append(prop(f"rmsnorm-finite-{name}", "rmsnorm", f"finite, nonzero outputs in {name} at "
                        f"activations ~{scale:g}", fin, True, fin, "rmsnorm-no-float32-upcast", 0.85))
    return out


# --------------------------------------------------------------------------- softmax, SwiGLU

def softmax_props(fn):
    out, g = [], _g(3)
    x = torch.randn(3, 4, 5, generator=g) * 3
    for dim in (0, 1):
        s = run(fn, x, dim)
        err = float((s.sum(dim) - 1).abs().max())
        last = float((s.sum(-1) - 1).abs().max())
        # 1e-3: a softmax computed in half precision sums to 1 +- 1e-3 (the precision check names that);
        # normalising the wrong axis leaves sums off by O(1)
        out.append(prop(f"softmax-sums-dim{dim}", "softmax", f"slices along dim={dim} sum to 1", err, "< 1e-3",
                        err < 1e-3, "softmax-ignores-dim" if last < 1e-3 else "softmax-normalisation", 0.85))
    base = run(fn, x, -1)
    shift = float((run(fn, x + 30, -1) - base).abs().max())
    out.append(prop("softmax-shift-invariant", "softmax", "softmax(x + 30) = softmax(x)", shift, "< 1e-5", shift < 1e-5,
                    "softmax-not-shift-invariant", 0.6))
    for c in (100.0, 1000.0):
        big = run(fn, x + c, -1)
        fin = bool(torch.isfinite(big).all())
        out.append(prop(f"softmax-finite-{int(c)}", "softmax", f"finite at logits ~{c:g}", fin, True, fin,
                        "softmax-overflow", 0.9 if fin is False and bool(torch.isfinite(base).all()) else 0.6))
    exact = torch.softmax(x.double(), -1)
    rel = float(((base - exact).abs() / exact.clamp_min(1e-30)).max())
    out.append(prop("softmax-precision", "softmax", "float32 softmax within float32 rounding of the exact one "
                    "(relative)", rel, "< 1e-5", rel < 1e-5, "softmax-low-precision", 0.7 if rel < 1e-2 else 0.5))
    return out


def swiglu_props(fn):
    """With w1 = w2 = w3 = I the layer is act(x) * x: the activation function can be read off."""
    d, out = 8, []
    x = torch.linspace(-4, 4, 2 * d).reshape(1, 2, d)
    eye = torch.eye(d)
    y = run(fn, d, d, eye, eye, eye, x)
    act = y / x.double()
    silu = torch.nn.functional.silu(x.double())
    err = float((act - silu).abs().max())
    gelu = torch.nn.functional.gelu(x.double())
    cause = "swiglu-wrong-activation"
    out.append(prop("swiglu-activation", "swiglu", "with identity weights SwiGLU(x) = silu(x) * x", err, "< 1e-5",
                    err < 1e-5, cause, 0.85 if float((act - gelu).abs().max()) < 1e-3 else 0.6))
    return out


# --------------------------------------------------------------------------- attention

def sdpa_props(fn):
    """V = I (keys x keys): the output is the attention matrix itself."""
    out, g = [], _g(4)
    nq, nk, d = 5, 7, 8
    q, k = torch.randn(2, nq, d, generator=g), torch.randn(2, nk, d, generator=g)
    v = torch.eye(nk).expand(2, nk, nk).contiguous()
    w = run(fn, q, k, v, torch.ones(2, nq, nk, dtype=torch.bool))   # a mask always (the course never passes None)
    if w.shape != (2, nq, nk):
        # nothing below can be measured on a wrong shape; with 4-D inputs and mask right, a 3-D mask that
        # gains an axis is broadcast against the wrong dimension
        w4 = run(fn, q[:, None], k[:, None], v[:, None], torch.ones(2, 1, nq, nk, dtype=torch.bool))
        extra = w.dim() > 3 and w4.shape == (2, 1, nq, nk)
        return [prop("sdpa-mask-shape", "sdpa", "a 3-D mask with 3-D inputs gives a 3-D output", list(w.shape),
                     [2, nq, nk], False, "mask-broadcast-wrong-dim" if extra else None, 0.85 if extra else 0.5)]
    rows = float((w.sum(-1) - 1).abs().max())
    cols = float((w.sum(-2) - 1).abs().max()) if nq == nk else math.inf
    # 1e-3: half-precision softmax sums to 1 +- 1e-3; a softmax over the wrong axis is off by O(1)
    out.append(prop("sdpa-rows-sum-to-one", "sdpa", "each query's weights over the keys sum to 1", rows, "< 1e-3",
                    rows < 1e-3, "softmax-wrong-dim" if float((w.sum(-2) - 1).abs().max()) < 1e-3 or cols < 1e-3
                    else "attention-not-normalised", 0.9))
    if rows < 1e-3 and bool((w > 0).all()):
        s = (q @ k.transpose(-1, -2)).double()
        lw = torch.log(w)
        ds, dl = s - s.mean(-1, keepdim=True), lw - lw.mean(-1, keepdim=True)
        c = float((ds * dl).sum() / (ds * ds).sum())
        want = 1 / math.sqrt(d)
        cause = {1.0: "missing-sqrt-dk", 1 / d: "attention-scaled-by-dk"}
        named = [v for f, v in cause.items() if abs(c - f) < 1e-3 * f]
        out.append(prop("sdpa-scale", "sdpa", "scores are scaled by 1/sqrt(d_k) (measured: d log w / d score)", c, want,
                        abs(c - want) < 1e-3 * want, named[0] if named else "attention-scale-wrong",
                        0.9 if named else 0.6))
    mask = torch.rand(2, nq, nk, generator=g) > 0.5
    mask[..., 0] = True
    wm = run(fn, q, k, v, mask)
    if wm.shape != w.shape:
        out.append(prop("sdpa-mask-shape", "sdpa", "a mask of the scores' shape leaves the output's shape unchanged",
                        list(wm.shape), list(w.shape), False, "mask-broadcast-wrong-dim", 0.85))
        return out
    leak = float(wm[~mask.expand_as(wm)].abs().max())
    allowed = float(wm[mask.expand_as(wm)].abs().min())
    cause = "mask-convention-inverted" if allowed < 1e-9 else "mask-fill-zero"
    out.append(prop("sdpa-masked-zero", "sdpa", "keys where mask is False get weight exactly 0", leak, 0.0, leak == 0.0,
                    cause, 0.9))
    return out


def _ref_mha(x, wq, wk, wv, wo, heads, scale=None, rope=None, rope_v=False, pos=None):
    """Our own causal MHA in float64 (for the scale and value-rotation checks)."""
    x = x.double()
    *lead, n, d = x.shape
    dh = d // heads

    def split(t):
        return t.view(*lead, n, heads, dh).transpose(-3, -2)
    q, k, v = split(x @ wq.double().T), split(x @ wk.double().T), split(x @ wv.double().T)
    if rope is not None:
        p = pos.unsqueeze(-2)
        q, k = rope(q, p), rope(k, p)
        if rope_v:
            v = rope(v, p)
    s = q @ k.transpose(-1, -2) * (scale if scale is not None else 1 / math.sqrt(dh))
    s = s.masked_fill(~torch.tril(torch.ones(n, n, dtype=torch.bool)), float("-inf"))
    o = torch.softmax(s, -1) @ v
    return o.transpose(-3, -2).reshape(*lead, n, d) @ wo.double().T


def _diagonal_projections(y, x, ws, heads, rope, pos):
    """The smallest set of the projections (q, k, v, output) whose diagonals alone, in our own MHA, give the
    student's output: an einsum that repeats an index in the weight ('...sd,dd->...sd') takes its diagonal.
    None when no set does."""
    for r in range(1, 5):
        for subset in itertools.combinations(range(4), r):
            w = [torch.diag(torch.diagonal(t)) if i in subset else t for i, t in enumerate(ws)]
            if _close(y, _ref_mha(x, *w, heads, rope=rope, pos=pos)):
                return [("q", "k", "v", "output")[i] for i in subset]
    return None


def _rope64(theta, dh):
    from reference_model.lm import RotaryPositionalEmbedding
    r = RotaryPositionalEmbedding(theta, dh, 64)
    r.cos, r.sin = r.cos.double(), r.sin.double()
    return r


def mha_props(fn, component="mha"):
    out, g = [], _g(5)
    d, h, n = 32, 4, 6
    wq, wk, wv, wo = (torch.randn(d, d, generator=g) / math.sqrt(d) for _ in range(4))
    x = torch.randn(2, n, d, generator=g)
    pos = torch.tensor([5, 6, 9, 10, 11, 20])          # 1-D: offset and gaps
    if component == "mha":
        f = lambda xx, a=wq, b=wk: run(fn, d, h, a, b, wv, wo, xx)       # noqa: E731
    else:
        f = lambda xx, a=wq, b=wk: run(fn, d, h, 32, 10000.0, a, b, wv, wo, xx, pos)  # noqa: E731
    y = f(x)
    out.append(causal_prop(component, dependency(f, x, n), bool(torch.isfinite(y[:, 0]).all())))
    rope = _rope64(10000.0, d // h) if component == "mha_rope" else None
    scales = {"attention-scaled-by-d-model": 1 / math.sqrt(d), "missing-sqrt-dk": 1.0, "attention-scaled-by-dk": h / d}
    want = _ref_mha(x, wq, wk, wv, wo, h, rope=rope, pos=pos)
    err = float((y - want).abs().max()) if y.shape == want.shape else math.inf
    named = [c for c, s in scales.items() if _close(y, _ref_mha(x, wq, wk, wv, wo, h, s, rope, pos=pos))]
    if rope is not None and _close(y, _ref_mha(x, wq, wk, wv, wo, h, rope=rope, rope_v=True, pos=pos)):
        named = ["rope-on-values"]
    out.append(prop(f"{component}-formula", component, "equals softmax(q k^T / sqrt(d_head)) v per head, causal"
                    + (", RoPE on q and k only" if rope else ""), err, "< 1e-4 relative",
                    y.shape == want.shape and _close(y, want), named[0] if named else None,
                    0.9 if named else 0.5))
    diag = None if y.shape != want.shape or _close(y, want) else _diagonal_projections(y, x, (wq, wk, wv, wo), h,
                                                                                      rope, pos)
    out.append(prop(f"{component}-projections-full", component, "each projection is the product x W^T (every input "
                    "feature reaches every output feature), not x times W's diagonal",
                    "only the diagonal of " + ", ".join(diag) if diag else "full products", "full products", not diag,
                    "einsum-repeated-index", 0.9))
    # uniform attention (w_q = 0): the output is the running mean of the values, whatever the scale
    z = torch.zeros(d, d)
    yu = f(x, z, z)
    vals = x.double() @ wv.double().T
    mean = torch.cumsum(vals, 1) / torch.arange(1, n + 1, dtype=torch.float64).view(1, n, 1)
    uni = mean @ wo.double().T
    ok = yu.shape == uni.shape and _close(yu, uni)
    # weights 1/n over every key, then the future zeroed: the mask was applied after the softmax
    after = (torch.cumsum(vals, 1) / n) @ wo.double().T
    cause, conf = "heads-split-wrong", 0.6
    if rope is not None and named == ["rope-on-values"]:
        cause, conf = "rope-on-values", 0.7
    elif yu.shape == after.shape and _close(yu, after):
        cause, conf = "mask-after-softmax", 0.85
    out.append(prop(f"{component}-heads-values", component, "with w_q = w_k = 0 every head averages the earlier values "
                    "(weights sum to 1, heads split and merged consistently"
                    + (", values not rotated)" if rope else ")"),
                    float((yu - uni).abs().max()) if yu.shape == uni.shape else math.inf, "< 1e-4 relative", ok,
                    cause, conf))
    return out


# --------------------------------------------------------------------------- block, LM

def block_props(fn):
    from .fingerprint import reference_fn
    out, g = [], _g(6)
    d, h, dff, n = 32, 4, 48, 6
    w = block_weights(g, d, dff)
    x = torch.randn(2, n, d, generator=g)
    f = lambda xx, ww=w: run(fn, d, h, dff, 32, 10000.0, ww, xx)           # noqa: E731
    ref = lambda xx, ww=w: run(reference_fn("block"), d, h, dff, 32, 10000.0, ww, xx)  # noqa: E731
    y = f(x)
    out.append(causal_prop("block", dependency(f, x, n), bool(torch.isfinite(y[:, 0]).all())))
    zero = {k: (torch.zeros_like(v) if k in ("attn.output_proj.weight", "ffn.w2.weight") else v) for k, v in w.items()}
    yz = f(x, zero)
    idn = float((yz - x.double()).abs().max())
    cause = "missing-residual" if float(yz.abs().max()) < 1e-6 else "post-norm"
    out.append(prop("block-residual-identity", "block", "with both sub-layers' output weights 0 the block is the "
                    "identity (residual stream untouched, norms only on sub-layer inputs)", idn, "< 1e-5", idn < 1e-5,
                    cause, 0.85 if cause == "missing-residual" else 0.7))
    for part, key in (("attention", "ffn.w2.weight"), ("feed-forward", "attn.output_proj.weight")):
        only = {k: (torch.zeros_like(v) if k == key else v) for k, v in w.items()}
        ys, yr = f(x, only), ref(x, only)
        err = float((ys - yr).abs().max())
        dropped = float((ys - x.double()).abs().max()) < 1e-5 and float((yr - x.double()).abs().max()) > 1e-3
        out.append(prop(f"block-{part}-path", "block", f"with only the {part} sub-layer active the block equals "
                        "x + sublayer(norm(x))", err, "< 1e-4 relative", _close(ys, yr),
                        f"{'attention' if part == 'attention' else 'ffn'}-output-dropped" if dropped else None,
                        0.85 if dropped else 0.5))
    return out


def lm_props(fn):
    from .fingerprint import reference_fn
    out, g = [], _g(7)
    cfg = dict(LM_CONFIG)
    w = lm_weights(g, cfg["vocab_size"], cfg["d_model"], cfg["d_ff"], cfg["num_layers"])
    ids = torch.randint(0, cfg["vocab_size"], (2, 8), generator=g)
    f = lambda ii, ww=w: run(fn, **cfg, weights=ww, in_indices=ii)         # noqa: E731
    y = f(ids)
    out.append(causal_prop("lm", dependency(f, ids, 8), bool(torch.isfinite(y[:, 0]).all())))
    probs = bool((y >= 0).all()) and float((y.sum(-1) - 1).abs().max()) < 1e-4
    out.append(prop("lm-returns-logits", "lm", "logits, not probabilities (rows do not sum to 1)", probs, False,
                    not probs, "lm-outputs-softmax", 0.9))
    w2 = dict(w, **{"ln_final.weight": w["ln_final.weight"] * 2})
    r = float((f(ids, w2) - 2 * y).abs().max())
    ignored = float((f(ids, w2) - y).abs().max()) < 1e-6
    out.append(prop("lm-final-norm-gain", "lm", "doubling ln_final.weight doubles the logits", r, "< 1e-4 relative",
                    r < 1e-4 * (1 + float(y.abs().max())), "missing-final-norm" if ignored else None,
                    0.9 if ignored else 0.5))
    w3 = dict(w, **{"lm_head.weight": w["lm_head.weight"] + 1.0})
    head_ignored = float((f(ids, w3) - y).abs().max()) < 1e-6
    tied = dict(w, **{"lm_head.weight": w["token_embeddings.weight"]})
    is_tied = head_ignored and _close(y, run(reference_fn("lm"), **cfg, weights=tied, in_indices=ids))
    out.append(prop("lm-head-used", "lm", "the logits change when lm_head.weight changes", not head_ignored, True,
                    not head_ignored, "lm-head-tied-to-embeddings" if is_tied else "lm-head-ignored",
                    0.9 if is_tied else 0.7))
    return out


PROPERTIES = {"rope": rope_props, "rmsnorm": rmsnorm_props, "softmax": softmax_props, "swiglu": swiglu_props,
              "sdpa": sdpa_props, "mha": mha_props, "mha_rope": lambda fn: mha_props(fn, "mha_rope"),
              "block": block_props, "lm": lm_props}


# The training components' properties register here when properties_train is imported (diagnose.py does),
# so this module never imports that one (which imports this one).
EXTRA: dict = {}


def check(component: str, fn) -> list[dict]:
    """Every property of the component that could be measured; a property whose call raised is left out."""
    table = {**PROPERTIES, **EXTRA}
    if component not in table:
        return []
    try:
        return table[component](fn)
    except Skip:
        return []
    except Exception:                                        # noqa: BLE001 - outputs of unexpected shape or type:
        return []                                            # not measurable, so no evidence either way
