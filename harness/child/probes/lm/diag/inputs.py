"""Seeded inputs per `lm` component, the outputs they give, and how two outputs are compared.

One *draw* is one seed: the same shapes with new random values. The shapes are chosen so
that every lm mutant of a component shows on them (see tests/unit/test_lm_mutants.py `_measure`):
non-square linear maps, RoPE positions (1-D) with an offset and gaps, RMSNorm at
small activations (1e-3, where eps matters) and in float16 at ~400 (x^2 overflows without the
float32 upcast), softmax over dim 0/1 and at logits ~1e3, 3-D and 4-D attention with queries !=
keys, cross-entropy with batch != vocab and at logits x300. Stateful components are run to a
result: AdamW for several steps on fixed gradients, the schedule over a sweep of `it`,
clipping in place on the gradients, get_batch summarised by its properties (the random draw
itself differs between correct implementations).

An output is a list of float64 tensors, or a string saying how the call ended otherwise
("raised RuntimeError: ...", "returned None", "not-implemented").
"""
from __future__ import annotations

import contextlib
import math
import os

import numpy as np
import torch

from .....readable import cut
from ..... import lm_table

# component -> adapter name, in the registry's spelling (mha_rope); the table is harness/lm_table.py
ADAPTER = {lm_table.registry_name(c): a for c, a in lm_table.ADAPTER.items()}
COMPONENTS = tuple(ADAPTER)          # the assignment's build order
# what each component is built from (a bug upstream shows downstream)
DEPS = {lm_table.registry_name(c): tuple(map(lm_table.registry_name, d)) for c, d in lm_table.DEPS.items() if d}
_SEED_INDEX = {lm_table.registry_name(c): i for i, c in enumerate(lm_table.SEED_ORDER)}


def canonical(component: str) -> str:
    """Accept the check path's spelling (mha-rope, cross-entropy) as well as the registry's."""
    name = component.replace("-", "_")
    if name not in ADAPTER:
        raise KeyError(f"unknown lm component {component!r}")
    return name


def closure(component: str) -> tuple[str, ...]:
    """The component and everything it is built from, upstream first."""
    seen: list[str] = []

    def visit(c):
        for d in DEPS.get(c, ()):
            visit(d)
        if c not in seen:
            seen.append(c)
    visit(component)
    return tuple(seen)


# --------------------------------------------------------------------------- builders

def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _randn(g, *shape, scale=1.0):
    return torch.randn(*shape, generator=g) * scale


def block_weights(g, d, d_ff, prefix=""):
    s = 1 / math.sqrt(d)
    w = {f"{prefix}attn.{n}.weight": _randn(g, d, d, scale=s) for n in ("q_proj", "k_proj", "v_proj", "output_proj")}
    w[f"{prefix}ln1.weight"] = 1 + 0.3 * _randn(g, d)
    w[f"{prefix}ffn.w1.weight"] = _randn(g, d_ff, d, scale=s)
    w[f"{prefix}ffn.w2.weight"] = _randn(g, d, d_ff, scale=1 / math.sqrt(d_ff))
    w[f"{prefix}ffn.w3.weight"] = _randn(g, d_ff, d, scale=s)
    w[f"{prefix}ln2.weight"] = 1 + 0.3 * _randn(g, d)
    return w


def lm_weights(g, vocab, d, d_ff, layers):
    w = {"token_embeddings.weight": _randn(g, vocab, d)}
    for i in range(layers):
        w.update(block_weights(g, d, d_ff, prefix=f"layers.{i}."))
    w["ln_final.weight"] = 1 + 0.3 * _randn(g, d)
    w["lm_head.weight"] = _randn(g, vocab, d, scale=1 / math.sqrt(d))
    return w


LM_CONFIG = dict(vocab_size=60, context_length=24, d_model=32, num_layers=2, num_heads=4, d_ff=48, rope_theta=10000.0)


GAPS = torch.tensor([5, 6, 9, 10, 11, 20, 21])     # token positions with an offset and gaps (not 0..seq-1)


def _mask(g, shape):
    m = torch.rand(*shape, generator=g) > 0.4       # True = may attend
    m[..., 0] = True                                 # every query sees a key: no NaN rows by construction
    return m


def adamw_run(cls, seed, *, lr=1e-3, wd=0.1, steps=8, grad_scale=1e-2):
    """Parameters after `steps` steps on seeded gradients; a frozen parameter must stay put."""
    g = _gen(seed)
    ps = [torch.nn.Parameter(_randn(g, 5, 4)), torch.nn.Parameter(_randn(g, 7))]
    frozen = torch.nn.Parameter(_randn(g, 3))
    opt = cls(ps + [frozen], lr=lr, weight_decay=wd, betas=(0.9, 0.999), eps=1e-8)
    for _ in range(steps):
        for p in ps:
            p.grad = _randn(g, *p.shape, scale=grad_scale) + 0.5 * grad_scale * torch.sign(p.detach())
        opt.step()
    return [p.detach().clone() for p in ps + [frozen]]


def clip_run(fn, seed, max_norm):
    g = _gen(seed)
    ps = [torch.nn.Parameter(_randn(g, 4, 3)), torch.nn.Parameter(_randn(g, 6)), torch.nn.Parameter(_randn(g, 2, 2))]
    ps[0].grad = _randn(g, 4, 3, scale=3.0)
    ps[1].grad = _randn(g, 6, scale=0.5)             # ps[2] has no gradient: it must be skipped
    fn(ps, max_norm)
    return [ps[0].grad.clone(), ps[1].grad.clone()]


def batch_summary(fn, seed, n=40, m=6, bs=600):
    """Properties of get_batch's output (the draw itself is the implementation's business)."""
    np.random.seed(seed)
    torch.manual_seed(seed)
    data = np.arange(n, dtype=np.int64) + 1000
    x, y = fn(data, bs, m, "cpu")
    starts = torch.as_tensor(x)[:, 0] - 1000
    xl, yl = torch.as_tensor(x).long(), torch.as_tensor(y).long()
    return [torch.tensor([
        float(tuple(x.shape) == (bs, m)), float(tuple(y.shape) == (bs, m)),
        float(x.dtype == torch.long), float(y.dtype == torch.long),
        float((yl - xl - 1).abs().max()),            # targets are the inputs shifted by one: 0
        float((xl[:, 1:] - xl[:, :-1] - 1).abs().max()),  # windows are contiguous: 0
        float(starts.min()), float(starts.max()),    # 0 .. n - m - 1
        float(len(set(starts.tolist()))),            # all n - m starts get drawn (600 draws of 34)
    ])]


SUMMARY_FIELDS = ("x shape", "y shape", "x int64", "y int64", "max |y - x - 1|", "max gap in a window",
                  "smallest start", "largest start", "distinct starts")


def cases(component: str, draw: int):
    """[(case name, call(fn) -> output)] for one draw of one component."""
    g = _gen(1000 + 17 * draw + _SEED_INDEX[component])
    c = []
    # (batch, seq, d) everywhere the course's tests use it: correct code written for exactly that
    # shape passes them, and must pass here (other ranks are the contract's "...", not its tests')
    if component == "linear":
        W, x = _randn(g, 12, 16, scale=0.25), _randn(g, 2, 5, 16)
        Ws, xs = _randn(g, 16, 16, scale=0.25), _randn(g, 2, 5, 16)
        c += [("non-square", lambda f: f(16, 12, W, x)), ("square", lambda f: f(16, 16, Ws, xs))]
    elif component == "embedding":
        E, ids = _randn(g, 50, 16), torch.randint(0, 50, (2, 7), generator=g)
        c += [("ids (2, 7)", lambda f: f(50, 16, E, ids))]
    elif component == "silu":
        x = _randn(g, 3, 17, scale=4.0)
        c += [("x ~ 4", lambda f: f(x))]
    elif component == "swiglu":
        w1, w2, w3 = _randn(g, 40, 16, scale=0.25), _randn(g, 16, 40, scale=0.16), _randn(g, 40, 16, scale=0.25)
        x = _randn(g, 2, 5, 16)
        c += [("d_ff 40", lambda f: f(16, 40, w1, w2, w3, x))]
    elif component == "rmsnorm":
        w = 1 + 0.3 * _randn(g, 16)
        x, small = _randn(g, 2, 5, 16, scale=3.0) + 0.5, _randn(g, 1, 3, 16, scale=1e-3)
        half = (_randn(g, 1, 3, 16) * 400).half()
        c += [("x ~ 3", lambda f: f(16, 1e-5, w, x)), ("x ~ 1e-3", lambda f: f(16, 1e-5, w, small)),
              ("float16 x ~ 400", lambda f: f(16, 1e-5, w.half(), half))]
    elif component == "softmax":
        x = _randn(g, 3, 4, 9, scale=5.0)
        c += [("dim -1", lambda f: f(x, -1)), ("dim 1", lambda f: f(x, 1)), ("dim 0", lambda f: f(x, 0)),
              ("logits ~ 1e3", lambda f: f(x * 200 + 1000, -1))]
    elif component == "sdpa":
        Q, K, V, M = _randn(g, 2, 3, 6, 8), _randn(g, 2, 3, 9, 8), _randn(g, 2, 3, 9, 10), _mask(g, (2, 3, 6, 9))
        Q3, K3, V3, M3 = _randn(g, 4, 6, 8), _randn(g, 4, 9, 8), _randn(g, 4, 9, 8), _mask(g, (4, 6, 9))
        full = torch.ones(4, 6, 9, dtype=torch.bool)     # always a mask: the course's tests never pass None
        c += [("4-D, mask", lambda f: f(Q, K, V, M)), ("3-D, mask", lambda f: f(Q3, K3, V3, M3)),
              ("3-D, all keys allowed", lambda f: f(Q3, K3, V3, full))]
    elif component == "rope":
        # 1-D positions only (what the course's interface is called with): an offset and gaps, then 3..9
        x = _randn(g, 2, 7, 16)
        c += [("positions 5, 6, 9, 10, 11, 20, 21", lambda f: f(16, 10000.0, 32, x, GAPS)),
              ("positions 3..9, theta 500", lambda f: f(16, 500.0, 32, x, torch.arange(3, 10)))]
    elif component in ("mha", "mha_rope"):
        d, h = 32, 4
        wq, wk, wv, wo = (_randn(g, d, d, scale=1 / math.sqrt(d)) for _ in range(4))
        x = _randn(g, 2, 7, d)
        if component == "mha":
            c += [("d 32, 4 heads", lambda f: f(d, h, wq, wk, wv, wo, x))]
        else:
            c += [("positions 5, 6, 9, 10, 11, 20, 21", lambda f: f(d, h, 32, 10000.0, wq, wk, wv, wo, x, GAPS))]
    elif component == "block":
        w, x = block_weights(g, 32, 48), _randn(g, 2, 7, 32)
        c += [("d 32, 4 heads", lambda f: f(32, 4, 48, 32, 10000.0, w, x))]
    elif component == "lm":
        w = lm_weights(g, 60, 32, 48, 2)
        ids = torch.randint(0, 60, (2, 10), generator=g)
        c += [("2 layers, 10 tokens", lambda f: f(**LM_CONFIG, weights=w, in_indices=ids))]
    elif component == "cross_entropy":
        logits, t = _randn(g, 8, 20, scale=3.0), torch.randint(0, 20, (8,), generator=g)
        c += [("logits ~ 3", lambda f: f(logits, t)), ("logits x 300", lambda f: f(logits * 300, t)),
              ("logits + 1000", lambda f: f(logits + 1000, t))]
    elif component == "gradient_clipping":
        seed = 100 + draw
        c += [("above the maximum", lambda f: clip_run(f, seed, 1.0)),
              ("below the maximum", lambda f: clip_run(f, seed, 1e4))]
    elif component == "adamw":
        seed = 200 + draw
        c += [("8 steps, lr 1e-3, wd 0.1, gradients ~1e-2", lambda f: adamw_run(f(), seed)),
              ("4 steps, gradients ~1e-4", lambda f: adamw_run(f(), seed, steps=4, grad_scale=1e-4))]
    elif component == "lr_schedule":
        tw, tc = [(7, 21), (5, 20), (3, 12), (10, 40), (4, 9)][draw % 5]
        hi, lo = [(1.0, 0.1), (3e-3, 3e-4), (0.5, 0.0), (1.0, 0.2), (2.0, 0.5)][draw % 5]
        c += [(f"it 0..{tc + 9}, T_w {tw}, T_c {tc}",
               lambda f: torch.tensor([float(f(it, hi, lo, tw, tc)) for it in range(tc + 10)]))]
    elif component == "get_batch":
        c += [("40 tokens, 600 windows of 6", lambda f: batch_summary(f, 300 + draw))]
    else:
        raise KeyError(component)
    return c


# --------------------------------------------------------------------------- running and comparing

_TORCH_DIR = os.path.dirname(torch.__file__)


def raised_by_torch(exc) -> bool:
    """A NotImplementedError from torch itself (a kernel missing for a dtype), not a student's stub."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    in_torch = tb is not None and tb.tb_frame.f_code.co_filename.startswith(_TORCH_DIR)
    return in_torch or "not implemented for '" in str(exc)


def run_case(call, fn):
    """The output of one case: list of float64 tensors, or a string for any other ending."""
    grad = contextlib.nullcontext()
    try:
        with grad:
            out = call(fn)
    except NotImplementedError as e:
        if not raised_by_torch(e):                          # the student's own `raise NotImplementedError`
            return "not-implemented"
        return f"raised NotImplementedError: {cut(e, 300)}"  # e.g. a kernel missing for an integer dtype
    except Exception as e:                                   # noqa: BLE001 - the student's exception is data
        return f"raised {type(e).__name__}: {cut(e, 300)}"
    if out is None:
        return "returned None"
    outs = out if isinstance(out, (list, tuple)) else [out]
    if not all(isinstance(t, torch.Tensor) for t in outs):
        return f"returned {type(out).__name__}"
    return [t.detach().double() for t in outs]


# Correct implementations differ from the reference by up to ~1.5e-6 on the LM's logits, 8e-5 on
# softmax at logits ~1e3 (exp(x - logsumexp x) in float32), 1e-5 on AdamW (the handout's and torch's
# placement of eps and the decay); float16 RMSNorm agrees to float16 resolution (1e-3 at outputs ~2).
# Tolerances are ~2-10x over those; the smallest mutant moves its component by > 1e-3 (adamw eps: 0.036).
TOL = {"float16 x ~ 400": 2e-2, "logits ~ 1e3": 2e-4}
COMPONENT_TOL = {"adamw": 5e-5}
DEFAULT_TOL = 2e-5
RELATIVE = 1e-5


def tolerance(component, case, ref) -> float:
    scale = 0.0
    if not isinstance(ref, str):
        for t in ref:
            f = t[torch.isfinite(t)]
            if f.numel():
                scale = max(scale, float(f.abs().max()))
    return TOL.get(case, COMPONENT_TOL.get(component, DEFAULT_TOL)) + RELATIVE * scale


def difference(a, b) -> float | None:
    """Largest entrywise |a - b|; inf when shapes or non-finite patterns differ; None if either is a string."""
    if isinstance(a, str) or isinstance(b, str):
        return None
    if len(a) != len(b):
        return math.inf
    worst = 0.0
    for x, y in zip(a, b):
        if x.shape != y.shape:
            return math.inf
        fx, fy = torch.isfinite(x), torch.isfinite(y)
        if not torch.equal(fx, fy) or not torch.equal(x[~fx].nan_to_num(0.0), y[~fy].nan_to_num(0.0)):
            return math.inf
        if fx.any():
            worst = max(worst, float((x[fx] - y[fx]).abs().max()))
    return worst


def same_ending(a, b) -> bool:
    """Two non-tensor endings agree: the same kind of exception, or both returned None."""
    if not (isinstance(a, str) and isinstance(b, str)):
        return False
    return a.split(":")[0] == b.split(":")[0]


def relative_error(out, ref) -> tuple[float | None, float | None]:
    """(max abs, max relative to the reference's largest value) over finite entries; None if not comparable."""
    d = difference(out, ref)
    if d is None:
        return None, None
    scale = max((float(t[torch.isfinite(t)].abs().max()) for t in ref if torch.isfinite(t).any()), default=0.0)
    return d, (d / scale if scale > 0 else d)
