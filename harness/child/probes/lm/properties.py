"""`lm` property probes: what every correct implementation has, whatever its style.

They need no reference output, so they hold for einsum, complex-number RoPE, cached cos/sin tables or
F.scaled_dot_product_attention alike, and they say *how* a component is wrong when it is:

  rope     the identity at position 0; norm-preserving; q_m . k_n depends only on m - n
  rmsnorm  invariant to scaling a token; each token normalised on its own
  softmax  invariant to adding a constant; finite at +1000
  causal   (mha, mha-rope, block, lm) outputs at a position do not depend on later tokens

Each is a check `lm-<component>-<property>`: pass, fail with the measured violation, or skip with the
reason (the adapter raises or is not implemented: the component's own check reports that).
"""
from __future__ import annotations

import torch

from ..base import check, rnd
from .common import Outcome, as_plain, call, gen
from .components import mha_weights, seeded_randn, block_weights, lm_weights
from .pictures import lm_dependency, rope_scores

TOL = 1e-4        # relative; float32 round-off of these small computations is < 1e-6 (measured on the reference)


def _run(ctx, comp, args, case):
    return as_plain(call(ctx, comp, args, case), comp, case, ctx)


def _rel(a, b) -> float:
    a, b = a.double(), b.double()
    if not (bool(torch.isfinite(a).all()) and bool(torch.isfinite(b).all())):
        return float("inf")
    return float((a - b).abs().max() / max(float(b.abs().max()), 1e-12))


def _result(pid, comp, violation, expected, detail_fail, detail_pass, prop, tol=TOL):
    ok = violation <= tol
    v = rnd(violation, 9) if violation != float("inf") else None
    return check(pid, "pass" if ok else "fail", {"violation": v}, expected,
                 detail_pass if ok else detail_fail, data={"component": comp, "property": prop})


def _guard(pid, comp, fn):
    """Run one property; an exception of the student's code skips it (the component's check reports it)."""
    try:
        return [fn()]
    except Outcome as o:
        return [check(pid, "skip", None, "", f"not measured: {o.check['detail'][:200]}",
                      data={"component": comp, "property": None, "timeout": bool(o.check["data"].get("timeout"))})]


def rope(ctx):
    g = gen(ctx.seed, 300)
    d, theta = 16, 10000.0
    x = seeded_randn(g, 2, 6, d)
    q, k = seeded_randn(g, 1, 1, d), seeded_randn(g, 1, 1, d)

    def identity():
        out = _run(ctx, "rope", (d, theta, 64, x.clone(), torch.zeros(6, dtype=torch.long)), "positions all 0")
        v = _rel(out, x)
        return _result("lm-rope-identity-at-0", "rope", v, "RoPE(x, position 0) == x",
                       f"at position 0 RoPE changed its input by {v:.2g} (relative): it must rotate by angle 0",
                       "RoPE is the identity at position 0", "identity-at-0")

    def norm():
        out = _run(ctx, "rope", (d, theta, 64, x.clone(), torch.arange(3, 9)), "positions 3..8")
        v = float(((out.double().norm(dim=-1) - x.double().norm(dim=-1)).abs() / x.double().norm(dim=-1)).max())
        return _result("lm-rope-norm", "rope", v, "|RoPE(x)| == |x| for every token",
                       f"RoPE changed token norms by up to {v:.2g} (relative): a rotation keeps them",
                       "RoPE preserves every token's norm", "norm-preserving")

    def relative():
        def score(m, n):
            qm = _run(ctx, "rope", (d, theta, 64, q.clone(), torch.tensor([m])), f"position {m}")
            kn = _run(ctx, "rope", (d, theta, 64, k.clone(), torch.tensor([n])), f"position {n}")
            return (qm.double() * kn.double()).sum()
        a, b, c = score(5, 2), score(20, 17), score(40, 37)
        # relative to |q| |k|, not to the score: a near-orthogonal pair would magnify float32 angle round-off
        v = float(max((a - b).abs(), (a - c).abs()) / float(q.double().norm() * k.double().norm()))
        return _result("lm-rope-relative", "rope", v, "q_m . k_n depends only on m - n",
                       f"q_5 . k_2, q_20 . k_17 and q_40 . k_37 differ by {v:.2g} (relative): the rotation "
                       "angle is not position x frequency (or positions are not used)",
                       "q_m . k_n depends only on m - n", "relative")
    out = (_guard("lm-rope-identity-at-0", "rope", identity) + _guard("lm-rope-norm", "rope", norm)
           + _guard("lm-rope-relative", "rope", relative))
    rope_scores(ctx, out)   # the report's picture of the same property, over every offset
    return out


def rmsnorm(ctx):
    g = gen(ctx.seed, 310)
    d = 16
    w, x = 1 + 0.2 * seeded_randn(g, d), seeded_randn(g, 4, 5, d)

    def scale():
        a = _run(ctx, "rmsnorm", (d, 1e-5, w.clone(), x.clone()), "x")
        b = _run(ctx, "rmsnorm", (d, 1e-5, w.clone(), 10 * x.clone()), "10 x")
        v = _rel(b, a)
        return _result("lm-rmsnorm-scale", "rmsnorm", v, "RMSNorm(10 x) == RMSNorm(x)",
                       f"scaling the input by 10 changed the output by {v:.2g} (relative)",
                       "RMSNorm is invariant to scaling a token", "scale-invariant")

    def per_token():
        a = _run(ctx, "rmsnorm", (d, 1e-5, w.clone(), x.clone()), "4 x 5 tokens")
        b = torch.stack([_run(ctx, "rmsnorm", (d, 1e-5, w.clone(), x[i:i + 1].clone()), "one row")[0]
                         for i in range(x.shape[0])])
        v = _rel(a, b)
        return _result("lm-rmsnorm-per-token", "rmsnorm", v, "each token normalised on its own",
                       f"a token's output depends on the other tokens in the batch (by {v:.2g}): the mean of "
                       "squares is taken over the wrong axis", "each token is normalised on its own", "per-token")
    return _guard("lm-rmsnorm-scale", "rmsnorm", scale) + _guard("lm-rmsnorm-per-token", "rmsnorm", per_token)


def softmax(ctx):
    x = seeded_randn(gen(ctx.seed, 320), 3, 7, scale=3.0)

    def shift():
        a = _run(ctx, "softmax", (x.clone(), -1), "x")
        b = _run(ctx, "softmax", (x.clone() + 100.0, -1), "x + 100")       # float32 keeps x + 100 to 8e-6
        c = _run(ctx, "softmax", (x.clone() + 1000.0, -1), "x + 1000")
        v = _rel(b, a) if bool(torch.isfinite(c.double()).all()) else float("inf")
        return _result("lm-softmax-shift", "softmax", v, "softmax(x + 100) == softmax(x); finite at + 1000",
                       "softmax of large logits is not finite (exp overflows: subtract the max first)"
                       if v == float("inf") else f"softmax(x + 100) differs from softmax(x) by {v:.2g}",
                       "invariant to adding a constant, finite at +1000", "shift-invariant")
    return _guard("lm-softmax-shift", "softmax", shift)


def _causal_pair(ctx, comp, build, what):
    """Change the last token only; outputs at every earlier position must not move."""
    args_a, args_b, t = build()
    a, b = _run(ctx, comp, args_a, what), _run(ctx, comp, args_b, what + " (last token changed)")
    v = _rel(a[..., :t - 1, :], b[..., :t - 1, :])
    return _result(f"lm-{comp}-causal", comp, v, "outputs before the last position ignore the last token",
                   f"changing only the last token moved outputs at earlier positions by {v:.2g} (relative): "
                   "attention sees future tokens", "no position sees a later token", "causal")


def causal(ctx):
    d, h, t = 32, 4, 8
    g = gen(ctx.seed, 330)
    ws, x = mha_weights(g, d), seeded_randn(g, 2, t, d)
    x2 = x.clone()
    x2[:, -1] = seeded_randn(g, 2, d)
    bw, lw = block_weights(g, d, 48), lm_weights(g, 40, d, 2, 48)
    ids = torch.randint(0, 40, (2, t), generator=g)
    ids2 = ids.clone()
    ids2[:, -1] = (ids[:, -1] + 7) % 40
    pos = torch.arange(t)
    builds = {
        "mha": lambda: ((d, h, *ws, x.clone()), (d, h, *ws, x2.clone()), t),
        "mha-rope": lambda: ((d, h, 64, 10000.0, *ws, x.clone(), pos), (d, h, 64, 10000.0, *ws, x2.clone(), pos), t),
        "block": lambda: ((d, h, 48, 64, 10000.0, dict(bw), x.clone()), (d, h, 48, 64, 10000.0, dict(bw), x2.clone()),
                          t),
        "lm": lambda: ((40, 16, d, 2, h, 48, 10000.0, dict(lw), ids), (40, 16, d, 2, h, 48, 10000.0, dict(lw), ids2),
                       t),
    }
    out = []
    for comp, build in builds.items():
        out += _guard(f"lm-{comp}-causal", comp, lambda comp=comp, build=build: _causal_pair(ctx, comp, build, comp))
    # the report's picture: every input position changed in turn, not only the last
    lm_dependency(ctx, lambda i: (40, 16, d, 2, h, 48, 10000.0, dict(lw), i), ids[0], 40, TOL,
                  [c for c in out if c["data"].get("component") == "lm"])
    return out
