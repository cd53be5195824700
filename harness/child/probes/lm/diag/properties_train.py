"""Properties of the training-side `lm` components: cross-entropy, gradient clipping, AdamW, the
learning-rate schedule and get_batch. Same measurement format as properties.py.
"""
from __future__ import annotations

import math

import torch

from .inputs import batch_summary
from .measure import prop, run, Skip
from .properties import EXTRA


def _g(seed):
    return torch.Generator().manual_seed(seed)


def cross_entropy_props(fn):
    out, g = [], _g(11)
    logits, t = torch.randn(8, 20, generator=g) * 3, torch.randint(0, 20, (8,), generator=g)
    want = float((torch.logsumexp(logits.double(), -1) - logits.double().gather(-1, t[:, None])[:, 0]).mean())
    got = float(run(fn, logits, t))
    ratio = got / want
    cause, conf = "cross-entropy-formula", 0.6
    if abs(ratio - 8) < 1e-3 * 8:
        cause, conf = "cross-entropy-sum-not-mean", 0.9
    elif abs(ratio - 8 / 20) < 1e-3:
        cause, conf = "cross-entropy-wrong-mean", 0.9
    out.append(prop("cross-entropy-formula", "cross_entropy",
                    "mean over the batch of logsumexp(logits) - logit[target]", got, round(want, 6),
                    abs(got - want) < 1e-4 * (1 + abs(want)), cause, conf))
    shifted = float(run(fn, logits + 1000, t))
    ok = math.isfinite(shifted) and abs(shifted - want) < 1e-3 * (1 + abs(want))
    out.append(prop("cross-entropy-shift-1000", "cross_entropy", "finite and unchanged when every logit is raised by "
                    "1000", shifted, round(want, 6), ok, "cross-entropy-overflow",
                    0.85 if not math.isfinite(shifted) else 0.5))
    if ok:
        wide = logits * 300
        w64 = float((torch.logsumexp(wide.double(), -1) - wide.double().gather(-1, t[:, None])[:, 0]).mean())
        got = float(run(fn, wide, t))
        ok2 = math.isfinite(got) and abs(got - w64) < 1e-4 * (1 + abs(w64))
        out.append(prop("cross-entropy-wide-logits", "cross_entropy", "finite at logit gaps of ~1000 (logits x 300)",
                        got, round(w64, 3), ok2, "cross-entropy-log-of-softmax" if not math.isfinite(got)
                        else "cross-entropy-formula", 0.85 if not math.isfinite(got) else 0.5))
    return out


def _grads(seed, scale=1.0):
    g = _g(seed)
    ps = [torch.nn.Parameter(torch.randn(4, 3, generator=g)), torch.nn.Parameter(torch.randn(6, generator=g)),
          torch.nn.Parameter(torch.randn(2, generator=g))]
    ps[0].grad = torch.randn(4, 3, generator=g) * 3 * scale
    ps[1].grad = torch.randn(6, generator=g) * 0.5 * scale          # ps[2] has no gradient
    return ps


def clipping_props(fn):
    out = []
    ps = _grads(12)
    before = [p.grad.clone().double() for p in ps[:2]]
    try:
        fn(ps, 1.0)
    except Exception as e:                                           # noqa: BLE001
        raise Skip(str(e)) from None
    after = [p.grad.double() for p in ps[:2]]
    total = math.sqrt(sum(float((a ** 2).sum()) for a in after))
    factors = [float(a.norm() / b.norm()) for a, b in zip(after, before)]
    each = [float(a.norm()) for a in after]
    one = abs(factors[0] - factors[1]) < 1e-5 * factors[0] and abs(total - 1.0) < 1e-4
    per_param = all(abs(n - 1.0) < 1e-4 or n < 1.0 for n in each) and abs(factors[0] - factors[1]) > 1e-3
    out.append(prop("clipping-global-norm", "gradient_clipping", "above the maximum every gradient is scaled by one "
                    "factor to a joint L2 norm of max_l2_norm", {"joint norm": round(total, 6),
                    "factors": [round(f, 6) for f in factors]}, "joint norm 1.0, equal factors", one,
                    "clipping-per-parameter" if per_param else "clipping-wrong-norm", 0.9 if per_param else 0.6))
    ps = _grads(12, scale=1e-3)
    before = [p.grad.clone() for p in ps[:2]]
    fn(ps, 1e4)
    change = max(float((p.grad - b).abs().max()) for p, b in zip(ps[:2], before))
    out.append(prop("clipping-below-max-unchanged", "gradient_clipping", "gradients below the maximum are left as "
                    "they are", change, 0.0, change < 1e-9, "clipping-scales-up", 0.9))
    return out


def _adam_steps(cls, steps, grad, wd, lr=1e-2, seed=13, shared=False):
    """Parameters after `steps` steps with gradient grad(p) (two parameters; `shared`: identical ones)."""
    g = _g(seed)
    a = torch.randn(6, generator=g)
    ps = [torch.nn.Parameter(a.clone()), torch.nn.Parameter(a.clone() if shared else torch.randn(6, generator=g))]
    opt = cls(ps, lr=lr, weight_decay=wd, betas=(0.9, 0.999), eps=1e-8)
    start = [p.detach().clone().double() for p in ps]
    for _ in range(steps):
        for p in ps:
            p.grad = grad(p.detach())
        opt.step()
    return start, [p.detach().clone().double() for p in ps]


def _adamw64(p, grads, lr, wd, torch_style, b1=0.9, b2=0.999, eps=1e-8):
    p, m, v = p.clone(), torch.zeros_like(p), torch.zeros_like(p)
    for t, gr in enumerate(grads, start=1):
        gr = gr.double()
        m, v = b1 * m + (1 - b1) * gr, b2 * v + (1 - b2) * gr * gr
        if torch_style:                                 # decay first, eps after the bias correction
            p = p * (1 - lr * wd)
            p = p - lr * (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).sqrt() + eps)
        else:                                           # the handout: corrected lr, eps on sqrt(v), decay after
            p = p - lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t) * m / (v.sqrt() + eps)
            p = p * (1 - lr * wd)
    return p


def adamw_props(get_cls):
    try:
        cls = get_cls()
    except Exception as e:                                           # noqa: BLE001
        raise Skip(str(e)) from None
    out, lr, wd = [], 1e-2, 0.1
    # zero gradients: the moments stay 0 and only the decoupled decay acts, p <- p (1 - lr wd)
    start, end = _adam_steps(cls, 1, lambda p: torch.zeros_like(p), wd)
    factor = float((end[0] / start[0]).mean())
    move = float((end[0] - start[0]).abs().mean())
    cause, conf = "adamw-weight-decay-wrong", 0.6
    if abs(factor - (1 - wd)) < 1e-4:
        cause, conf = "adamw-decay-not-scaled-by-lr", 0.9
    elif abs(move - lr) < 0.05 * lr:
        cause, conf = "adamw-coupled-weight-decay", 0.85
    out.append(prop("adamw-decoupled-decay", "adamw", "with zero gradients one step multiplies p by (1 - lr * wd)",
                    round(factor, 6), 1 - lr * wd, abs(factor - (1 - lr * wd)) < 1e-5, cause, conf))
    # first step with wd = 0: the bias-corrected update is lr * g / |g| (|g| >> eps)
    _, (s1, e1) = None, _adam_steps(cls, 1, lambda p: torch.full_like(p, 0.05), 0.0)
    step = float((s1[0] - e1[0]).mean())
    # without the correction the first step is lr * (1 - beta1) / sqrt(1 - beta2) = 3.16 lr
    uncorrected = abs(step - lr * 0.1 / math.sqrt(1e-3)) < 0.01 * lr
    out.append(prop("adamw-bias-correction", "adamw", "the first step (wd 0, gradient 0.05) moves every parameter "
                    "by lr", step, lr, abs(step - lr) < 1e-3 * lr,
                    "adamw-no-bias-correction" if uncorrected else "adamw-step-size-wrong",
                    0.9 if uncorrected else 0.6))
    # tiny gradients: eps (1e-8) is added to sqrt(v), so a gradient of 1e-4 still moves p by ~lr
    _, (s2, e2) = None, _adam_steps(cls, 1, lambda p: torch.full_like(p, 1e-4), 0.0)
    tiny = float((s2[0] - e2[0]).mean())
    out.append(prop("adamw-eps-placement", "adamw", "a first step with gradients 1e-4 still moves p by ~lr (eps "
                    "added to sqrt(v), not under the root)", tiny, lr, abs(tiny - lr) < 0.01 * lr,
                    "adamw-eps-inside-sqrt" if tiny < 0.5 * lr else "adamw-step-size-wrong",
                    0.85 if tiny < 0.5 * lr else 0.5))
    # many steps against AdamW written out in float64 (either placement of eps and of the decay is correct)
    g = _g(14)
    grads = [torch.randn(6, generator=g) * 0.05 for _ in range(40)]
    calls = iter(range(80))                             # two parameters per step: both get step k's gradient
    start, end = _adam_steps(cls, 40, lambda p: grads[next(calls) // 2], wd)
    gap = min(float((end[0] - _adamw64(start[0], grads, lr, wd, torch_style=t)).abs().max()) for t in (False, True))
    out.append(prop("adamw-many-steps", "adamw", "40 steps match decoupled weight decay with bias correction "
                    "(the handout's or torch's form)", gap, "< 1e-5", gap < 1e-5, "adamw-update-wrong", 0.5))
    # two identical parameters with identical gradients take identical steps (state per parameter)
    _, ends = _adam_steps(cls, 3, lambda p: 0.05 * torch.sign(p) + 0.01, wd, shared=True)
    gap = float((ends[0] - ends[1]).abs().max())
    out.append(prop("adamw-per-parameter-state", "adamw", "two identical parameters with identical gradients stay "
                    "identical over 3 steps", gap, 0.0, gap < 1e-9, "adamw-step-counted-per-parameter", 0.85))
    return out


def schedule_props(fn):
    hi, lo, tw, tc = 1.0, 0.1, 8, 24
    lr = [float(fn(it, hi, lo, tw, tc)) for it in range(tc + 16)]
    out = []
    want0, wmid = 0.0, hi * (tw // 2) / tw
    ok = abs(lr[0]) < 1e-9 and abs(lr[tw // 2] - wmid) < 1e-9 and abs(lr[tw] - hi) < 1e-9
    cause = "schedule-warmup-off-by-one" if abs(lr[0] - hi / tw) < 1e-9 else (
        "schedule-warmup-integer-division" if all(v == 0 for v in lr[:tw]) else "schedule-warmup-wrong")
    out.append(prop("schedule-warmup", "lr_schedule", f"lr(0) = 0, lr({tw // 2}) = {wmid:g}, lr({tw}) = max (T_w {tw})",
                    [lr[0], round(lr[tw // 2], 6), round(lr[tw], 6)], [want0, wmid, hi], ok, cause,
                    0.9 if cause != "schedule-warmup-wrong" else 0.6))
    mid = (tw + tc) // 2
    want_mid = lo + 0.5 * (1 + math.cos(math.pi * (mid - tw) / (tc - tw))) * (hi - lo)
    ok_c = abs(lr[mid] - want_mid) < 1e-6 and abs(lr[tc] - lo) < 1e-9
    full = lo + 0.5 * (1 + math.cos(math.pi * (mid - tw) / tc)) * (hi - lo)
    out.append(prop("schedule-cosine", "lr_schedule", f"cosine from max at T_w to min at T_c (T_c {tc})",
                    [round(lr[mid], 6), round(lr[tc], 6)], [round(want_mid, 6), lo], ok_c,
                    "schedule-cosine-length" if abs(lr[mid] - full) < 1e-6 else "schedule-cosine-wrong",
                    0.85 if abs(lr[mid] - full) < 1e-6 else 0.6))
    after = lr[tc + 1:]
    floor = all(abs(v - lo) < 1e-9 for v in after)
    late = not floor and abs(after[-1] - lo) < 1e-9
    out.append(prop("schedule-floor", "lr_schedule", "lr = min for every it > T_c", [round(v, 4) for v in after[:4]],
                    lo, floor, "schedule-floor-late" if late else "schedule-no-floor", 0.85))
    return out


def get_batch_props(fn):
    try:
        s = batch_summary(fn, 21)[0].tolist()
    except Exception as e:                                           # noqa: BLE001
        raise Skip(str(e)) from None
    n, m = 40, 6
    out = [prop("get-batch-shifted", "get_batch", "targets are the inputs shifted by one token (max |y - x - 1|)",
                s[4], 0, s[4] == 0, "target-not-shifted", 0.9),
           prop("get-batch-contiguous", "get_batch", "each row is a contiguous window", s[5], 0, s[5] == 0,
                "get-batch-windows-not-contiguous", 0.8),
           prop("get-batch-start-range", "get_batch", f"starts drawn over 0..{n - m - 1} (every window, the last too)",
                [s[6], s[7]], [0, n - m - 1], s[6] == 0 and s[7] == n - m - 1, "get-batch-start-range", 0.85),
           prop("get-batch-independent-rows", "get_batch", "600 rows draw many different starts", s[8], f"{n - m}",
                s[8] > 1, "get-batch-one-window", 0.9)]
    return out


TRAIN_PROPERTIES = {"cross_entropy": cross_entropy_props, "gradient_clipping": clipping_props, "adamw": adamw_props,
                    "lr_schedule": schedule_props, "get_batch": get_batch_props}


EXTRA.update(TRAIN_PROPERTIES)      # registered with properties.check
