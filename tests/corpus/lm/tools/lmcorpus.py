"""Load an `lm` corpus entry (a repository folder or one .py file), run every adapter on
seeded inputs, and compare two entries' outputs.

Used by tests/unit/test_lm_corpus_manifest.py (the correct entries must agree with each other)
and by measure.py (each bug must change its component's output). Only numpy and torch.
"""
import contextlib
import importlib.util
import itertools
import math
import sys
from pathlib import Path

import numpy as np
import torch

_counter = itertools.count()

ADAPTERS = [
    "run_linear", "run_embedding", "run_silu", "run_swiglu", "run_rmsnorm", "run_softmax",
    "run_scaled_dot_product_attention", "run_rope", "run_multihead_self_attention",
    "run_multihead_self_attention_with_rope", "run_transformer_block", "run_transformer_lm",
    "run_cross_entropy", "run_gradient_clipping", "get_adamw_cls", "run_get_lr_cosine_schedule",
    "run_get_batch",
]


def _top_names(root):
    # names a repository can shadow: its packages and top-level modules
    names = {p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    names |= {p.stem for p in root.glob("*.py")}
    return names - {"tests"}  # adapters.py is loaded by path; never touch the project's tests


def _purge(names):
    for mod in list(sys.modules):
        if mod.split(".")[0] in names:
            del sys.modules[mod]


@contextlib.contextmanager
def loaded(path):
    """Yield a dict name -> adapter function for the entry at `path`.

    A folder is a repository: tests/adapters.py imported with the folder on sys.path (its
    package names are purged from sys.modules before and after, so repositories that all
    call their package cs336_basics do not clash). A file is imported as a module."""
    path = Path(path).resolve()
    if path.is_dir():
        target, root = path / "tests" / "adapters.py", path
        names = _top_names(root)
    else:
        target, root, names = path, path.parent, set()
    _purge(names)
    sys.path.insert(0, str(root))
    try:
        spec = importlib.util.spec_from_file_location(f"lmcorpus_entry_{next(_counter)}", target)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        yield {n: getattr(mod, n) for n in ADAPTERS if hasattr(mod, n)}
    finally:
        sys.path.remove(str(root))
        _purge(names)


# --------------------------------------------------------------------------- cases

def _g(seed):
    return torch.Generator().manual_seed(seed)


def _randn(g, *shape, scale=1.0):
    return torch.randn(*shape, generator=g) * scale


def _block_weights(g, d_model, d_ff, prefix=""):
    s = 1 / math.sqrt(d_model)
    w = {f"{prefix}attn.{n}_proj.weight": _randn(g, d_model, d_model, scale=s) for n in "qkv"}
    w[f"{prefix}attn.output_proj.weight"] = _randn(g, d_model, d_model, scale=s)
    w[f"{prefix}ln1.weight"] = 1 + 0.1 * _randn(g, d_model)
    w[f"{prefix}ffn.w1.weight"] = _randn(g, d_ff, d_model, scale=s)
    w[f"{prefix}ffn.w2.weight"] = _randn(g, d_model, d_ff, scale=1 / math.sqrt(d_ff))
    w[f"{prefix}ffn.w3.weight"] = _randn(g, d_ff, d_model, scale=s)
    w[f"{prefix}ln2.weight"] = 1 + 0.1 * _randn(g, d_model)
    return w


def _sdpa_mask(g, shape):
    m = torch.rand(*shape, generator=g) > 0.4  # True = may attend
    m[..., 0] = True  # every query sees at least one key (no NaN rows by construction)
    return m


def _adamw_run(cls, seed):
    g = _g(seed)
    params = [torch.nn.Parameter(_randn(g, 5, 4)), torch.nn.Parameter(_randn(g, 7))]
    frozen = torch.nn.Parameter(_randn(g, 3))  # never gets a gradient: must stay put
    opt = cls(params + [frozen], lr=1e-3, weight_decay=0.1, betas=(0.9, 0.999), eps=1e-8)
    target = _randn(g, 5, 4)
    w = _randn(g, 7)
    w = w + 0.5 * torch.sign(w)  # gradients well above eps, where every correct variant agrees
    for _ in range(12):
        opt.zero_grad()
        loss = ((params[0] - target) ** 2).sum() + (params[1] * w).sum() + (params[1] ** 2).sum() * 0.1
        loss.backward()
        opt.step()
    return [p.detach().clone() for p in params + [frozen]]


def _clip_run(fn, seed, max_norm):
    g = _g(seed)
    ps = [torch.nn.Parameter(_randn(g, 4, 3)), torch.nn.Parameter(_randn(g, 6)),
          torch.nn.Parameter(_randn(g, 2, 2))]
    ps[0].grad = _randn(g, 4, 3, scale=3.0)
    ps[1].grad = _randn(g, 6, scale=0.5)  # ps[2] has no gradient
    fn(ps, max_norm)
    return [ps[0].grad.clone(), ps[1].grad.clone()]


def _batch_summary(fn, seed, n=40, m=6, bs=600):
    # samples differ between correct implementations; their properties do not
    np.random.seed(seed)
    torch.manual_seed(seed)
    data = np.arange(n, dtype=np.int64) + 1000
    x, y = fn(data, bs, m, "cpu")
    x, y = torch.as_tensor(x), torch.as_tensor(y)
    starts = x[:, 0] - 1000
    return torch.tensor([
        float(tuple(x.shape) == (bs, m)), float(tuple(y.shape) == (bs, m)),
        float(x.dtype == torch.long), float(y.dtype == torch.long),
        (y - x - 1).abs().max().item(),                  # targets are inputs shifted by one
        (x[:, 1:] - x[:, :-1] - 1).abs().max().item(),   # windows are contiguous
        starts.min().item(), starts.max().item(),        # 0 .. n - m - 1
        float(len(set(starts.tolist()))),                # all n - m starts get drawn
    ])


def cases():
    """name -> (adapter, call(fn) -> output, tolerance). Output: a tensor or list of tensors."""
    c = {}
    g = _g(0)
    W = _randn(g, 12, 16, scale=0.25); x = _randn(g, 2, 3, 5, 16)
    c["linear"] = ("run_linear", lambda f: f(16, 12, W, x))
    E = _randn(g, 50, 16); ids = torch.randint(0, 50, (2, 7), generator=g)
    c["embedding"] = ("run_embedding", lambda f: f(50, 16, E, ids))
    xs = _randn(g, 3, 17, scale=4.0)
    c["silu"] = ("run_silu", lambda f: f(xs))
    w1, w2, w3 = _randn(g, 40, 16, scale=0.25), _randn(g, 16, 40, scale=0.16), _randn(g, 40, 16, scale=0.25)
    xf = _randn(g, 2, 5, 16)
    c["swiglu"] = ("run_swiglu", lambda f: f(16, 40, w1, w2, w3, xf))
    gw = 1 + 0.2 * _randn(g, 16)
    xr = _randn(g, 2, 5, 16, scale=3.0) + 0.5
    c["rmsnorm"] = ("run_rmsnorm", lambda f: f(16, 1e-5, gw, xr))
    xr_small = _randn(g, 3, 16, scale=1e-3)
    c["rmsnorm_small"] = ("run_rmsnorm", lambda f: f(16, 1e-5, gw, xr_small))
    xr_half = (_randn(g, 3, 16) * 400).half()
    c["rmsnorm_half"] = ("run_rmsnorm", lambda f: f(16, 1e-5, gw.half(), xr_half))
    xsm = _randn(g, 3, 4, 9, scale=5.0)
    c["softmax"] = ("run_softmax", lambda f: f(xsm, -1))
    c["softmax_dim1"] = ("run_softmax", lambda f: f(xsm, 1))
    c["softmax_large"] = ("run_softmax", lambda f: f(xsm * 200 + 1000, -1))
    Q, K, V = _randn(g, 2, 3, 6, 8), _randn(g, 2, 3, 9, 8), _randn(g, 2, 3, 9, 10)
    M4 = _sdpa_mask(g, (2, 3, 6, 9))
    c["sdpa"] = ("run_scaled_dot_product_attention", lambda f: f(Q, K, V, M4))
    Q3, K3, V3 = _randn(g, 4, 6, 8), _randn(g, 4, 9, 8), _randn(g, 4, 9, 8)
    M3 = _sdpa_mask(g, (4, 6, 9))
    c["sdpa_3d"] = ("run_scaled_dot_product_attention", lambda f: f(Q3, K3, V3, M3))
    c["sdpa_nomask"] = ("run_scaled_dot_product_attention", lambda f: f(Q3, K3, V3, None))
    xq = _randn(g, 2, 7, 16)
    pos = torch.tensor([[0, 1, 2, 3, 4, 5, 6], [5, 6, 9, 10, 11, 20, 21]])  # offset, gaps
    c["rope"] = ("run_rope", lambda f: f(16, 10000.0, 32, xq, pos))
    c["rope_1dpos"] = ("run_rope", lambda f: f(16, 500.0, 32, xq, torch.arange(3, 10)))
    dm, h = 32, 4
    s = 1 / math.sqrt(dm)
    wq, wk, wv, wo = (_randn(g, dm, dm, scale=s) for _ in range(4))
    xm = _randn(g, 2, 7, dm)
    c["mha"] = ("run_multihead_self_attention", lambda f: f(dm, h, wq, wk, wv, wo, xm))
    c["mha_rope"] = ("run_multihead_self_attention_with_rope",
                     lambda f: f(dm, h, 32, 10000.0, wq, wk, wv, wo, xm, pos))
    bw = _block_weights(g, dm, 48)
    xb = _randn(g, 2, 7, dm)
    c["block"] = ("run_transformer_block", lambda f: f(dm, h, 48, 32, 10000.0, bw, xb))
    lw = {"token_embeddings.weight": _randn(g, 60, dm)}
    for i in range(2):
        lw.update(_block_weights(g, dm, 48, prefix=f"layers.{i}."))
    lw["ln_final.weight"] = 1 + 0.1 * _randn(g, dm)
    lw["lm_head.weight"] = _randn(g, 60, dm, scale=s)
    idx = torch.randint(0, 60, (2, 10), generator=g)
    c["lm"] = ("run_transformer_lm", lambda f: f(60, 16, dm, 2, h, 48, 10000.0, lw, idx))
    logits, tgt = _randn(g, 8, 20, scale=3.0), torch.randint(0, 20, (8,), generator=g)
    c["cross_entropy"] = ("run_cross_entropy", lambda f: f(logits, tgt))
    c["cross_entropy_large"] = ("run_cross_entropy", lambda f: f(logits * 300, tgt))
    c["gradient_clipping"] = ("run_gradient_clipping", lambda f: _clip_run(f, 1, 1.0))
    c["gradient_clipping_noop"] = ("run_gradient_clipping", lambda f: _clip_run(f, 1, 1e4))
    c["adamw"] = ("get_adamw_cls", lambda f: _adamw_run(f(), 2))
    c["lr_schedule"] = ("run_get_lr_cosine_schedule",
                        lambda f: torch.tensor([float(f(it, 1.0, 0.1, 7, 21)) for it in range(30)]))
    c["get_batch"] = ("run_get_batch", lambda f: _batch_summary(f, 3))
    return c


# half-precision inputs are compared at half-precision resolution; AdamW at the
# difference the handout's and torch's placement of eps and of the decay make; softmax at
# logits ~1e3 at the float32 rounding of logsumexp (exp(x - logsumexp(x)) is correct code
# that is off by up to ~8e-5 there)
TOL = {"rmsnorm_half": 2e-2, "adamw": 1e-5, "softmax_large": 2e-4}
DEFAULT_TOL = 2e-5

COMPONENT = {  # case -> component named in the manifest
    "linear": "linear", "embedding": "embedding", "silu": "silu", "swiglu": "swiglu",
    "rmsnorm": "rmsnorm", "rmsnorm_small": "rmsnorm", "rmsnorm_half": "rmsnorm",
    "softmax": "softmax", "softmax_dim1": "softmax", "softmax_large": "softmax",
    "sdpa": "sdpa", "sdpa_3d": "sdpa", "sdpa_nomask": "sdpa", "rope": "rope", "rope_1dpos": "rope",
    "mha": "mha", "mha_rope": "mha_rope", "block": "block", "lm": "lm",
    "cross_entropy": "cross_entropy", "cross_entropy_large": "cross_entropy",
    "gradient_clipping": "gradient_clipping", "gradient_clipping_noop": "gradient_clipping",
    "adamw": "adamw", "lr_schedule": "lr_schedule", "get_batch": "get_batch",
}


def run_all(adapters, only=None):
    """case -> output (list of float64 tensors) or an error string."""
    torch.manual_seed(0)
    out = {}
    for name, (adapter, call) in cases().items():
        if only and COMPONENT[name] not in only:
            continue
        fn = adapters.get(adapter)
        if fn is None:
            out[name] = "missing"
            continue
        try:
            with torch.no_grad() if adapter not in ("get_adamw_cls",) else contextlib.nullcontext():
                r = call(fn)
        except NotImplementedError:
            out[name] = "not-implemented"
            continue
        except Exception as e:  # a bug may crash; that is a measured outcome too
            out[name] = f"error: {type(e).__name__}: {e}"[:300]
            continue
        if r is None:
            out[name] = "returned-None"
            continue
        rs = r if isinstance(r, (list, tuple)) else [r]
        out[name] = [torch.as_tensor(t).detach().double() for t in rs]
    return out


def diff(a, b):
    """Max abs difference of two outputs of one case: inf when shapes differ, nan when
    either is non-finite where the other is not, None when either is an error string."""
    if isinstance(a, str) or isinstance(b, str):
        return None
    if len(a) != len(b):
        return math.inf
    worst = 0.0
    for ta, tb in zip(a, b):
        if ta.shape != tb.shape:
            return math.inf
        fa, fb = torch.isfinite(ta), torch.isfinite(tb)
        if not torch.equal(fa, fb):
            return math.inf
        if fa.any():
            worst = max(worst, (ta[fa] - tb[fa]).abs().max().item())
    return worst


def tol(case, ref=None):
    """Allowed max abs difference for `case`; relative part scaled by the reference output."""
    scale = 0.0
    if ref is not None and not isinstance(ref, str):
        scale = max((t[torch.isfinite(t)].abs().max().item() if torch.isfinite(t).any() else 0.0)
                    for t in ref)
    return TOL.get(case, DEFAULT_TOL) + 1e-5 * scale
