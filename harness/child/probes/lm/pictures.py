"""`lm` report pictures: numbers measured on the student's adapters, stored in ctx.artifacts (plain lists).

    rope_scores(ctx)            artifacts["lm_rope_scores"]: q_m . k_n against the offset m - n, yours and the reference's
    lm_dependency(ctx, ...)     artifacts["lm_dependency"]: which LM outputs move when one input token changes
    schedule_curve(ctx, ...)    artifacts["lm_lr_schedule"]: the schedule probe's values, yours and the reference's

They run inside the property and schedule probes, after those probes' checks, and never change a check: when the
student's code raises (or returns something that is not a tensor of the right shape) the artifact is
{"skipped": one sentence} and the report says so instead of drawing. Each costs a few ms on the reference.
"""
from __future__ import annotations

import math
import time

import torch

from ....readable import cut
from .common import ADAPTER, Outcome, as_plain, call, gen, reference

ROPE_L, ROPE_D, ROPE_THETA, ROPE_MAX = 32, 16, 10000.0, 64


def _sig(v: float, n: int = 4) -> float | None:
    """n significant digits (the JSON stays small and the picture loses nothing); None for NaN or inf."""
    v = float(v)
    return float(f"{v:.{n}g}") if math.isfinite(v) else None


def _guarded(ctx, key: str, comp: str, fn, before=()):
    """Run one measurement; an exception of the student's code becomes {"skipped": why} under `key`.
    `before`: the checks that already called the adapter; one that timed out is not waited for again."""
    if any((c.get("data") or {}).get("timeout") for c in before):
        ctx.artifacts[key] = {"skipped": f"{ADAPTER[comp]} did not return in time on the property checks"}
        return
    t = time.perf_counter()
    try:
        ctx.artifacts[key] = fn()
        ctx.artifacts[key]["ms"] = round(1000 * (time.perf_counter() - t), 1)
    except Outcome as o:
        ctx.artifacts[key] = {"skipped": f"{ADAPTER[comp]}: {cut(o.check.get('detail', ''), 200)}"}
    except MemoryError:
        raise
    except Exception as e:   # the harness's own bug must not cost the property checks that already ran
        ctx.artifacts[key] = {"skipped": f"not measured (internal error {type(e).__name__}: {cut(e, 120)})"}


def rope_scores(ctx, before=()):
    """One fixed q and k, both rotated at 32 shuffled positions in one call: the 32 x 32 scores q_m . k_n.

    Shuffled positions: an implementation that rotates by the index in the tensor instead of token_positions
    is relative in the index, not in the positions, so it shows spread at equal offsets too."""
    def measure():
        g = gen(ctx.seed, 340)
        q, k = torch.randn(ROPE_D, generator=g), torch.randn(ROPE_D, generator=g)
        pos = torch.randperm(ROPE_L, generator=g)                     # (L,) positions 0..31, shuffled

        x = torch.stack([q.expand(ROPE_L, ROPE_D), k.expand(ROPE_L, ROPE_D)])   # (2, L, d): q, then k, everywhere
        case = f"one q and one k at {ROPE_L} shuffled positions"
        out = as_plain(call(ctx, "rope", (ROPE_D, ROPE_THETA, ROPE_MAX, x.clone(), pos.clone()), case), "rope", case)
        if tuple(out.shape) != (2, ROPE_L, ROPE_D):
            raise Outcome({"detail": f"returned shape {list(out.shape)} for input shape [2, {ROPE_L}, {ROPE_D}]"})
        ref_out = reference().run_rope(ROPE_D, ROPE_THETA, ROPE_MAX, x.double(), pos.clone()).double()
        norm = float(q.double().norm() * k.double().norm())
        got = out[0].double() @ out[1].double().T / norm              # (L, L): row a is q at pos[a], column b k at pos[b]
        want = ref_out[0] @ ref_out[1].T / norm
        offset = (pos[:, None] - pos[None, :]).flatten()              # (L*L,) m - n
        ref = {}
        for o, s in zip(offset.tolist(), want.flatten().tolist()):
            ref.setdefault(o, s)                                      # the reference is relative: any pair will do
        flat = got.flatten()                                          # (L*L,)
        spread = max(float(flat[offset == o].max() - flat[offset == o].min()) for o in ref)
        dev = float((flat - torch.tensor([ref[o] for o in offset.tolist()], dtype=torch.float64)).abs().max())
        return {"offset": offset.tolist(), "score": [_sig(s, 5) for s in got.flatten().tolist()],
                "ref_offset": sorted(ref), "ref_score": [_sig(ref[o], 6) for o in sorted(ref)],
                "positions": pos.tolist(), "d_k": ROPE_D, "theta": ROPE_THETA,
                "spread": _sig(spread, 3), "max_dev": _sig(dev, 3)}     # exact, before the rounding above
    _guarded(ctx, "lm_rope_scores", "rope", measure, before)


def lm_dependency(ctx, args, ids: torch.Tensor, vocab: int, tol: float, before=()):
    """args(ids) -> run_transformer_lm's arguments. One call on T + 1 rows: row 0 is `ids`, row j + 1 the same
    with token j changed; how far each output position i of row j + 1 moved from row 0, relative to the largest
    logit, is entry (i, j) of the (T, T) matrix."""
    def measure():
        t = ids.shape[-1]
        batch = ids.expand(t + 1, t).clone()                          # (T+1, T)
        for j in range(t):
            batch[j + 1, j] = (ids[j] + 7) % vocab
        case = f"{t + 1} sequences, each with one token changed"
        out = as_plain(call(ctx, "lm", args(batch), case), "lm", case)
        if out.dim() != 3 or tuple(out.shape[:2]) != (t + 1, t):
            raise Outcome({"detail": f"returned shape {list(out.shape)} for token ids of shape [{t + 1}, {t}]"})
        out = out.double()                                            # (T+1, T, vocab)
        scale = max(float(out[0].abs().max()), 1e-12)
        moved = (out[1:] - out[:1]).abs().amax(dim=-1) / scale        # (T, T): [j, i] = output i, token j changed
        return {"matrix": [[_sig(v, 3) for v in row] for row in moved.T.tolist()], "tol": tol}   # row i, column j
    _guarded(ctx, "lm_dependency", "lm", measure, before)


def schedule_curve(ctx, setting: tuple, its: list, got: list, want: list):
    """The schedule probe's own values for one setting (every iteration of it): nothing is called again."""
    lr_max, lr_min, warmup, cycle = setting
    ctx.artifacts["lm_lr_schedule"] = {"it": list(its), "lr": [_sig(v, 6) for v in got],
                                       "ref": [_sig(v, 6) for v in want], "max_lr": lr_max, "min_lr": lr_min,
                                       "warmup": warmup, "cycle": cycle}
