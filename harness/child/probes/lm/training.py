"""`lm` probes of the training pieces: cross-entropy, AdamW, the cosine schedule, gradient clipping, get_batch."""
from __future__ import annotations

import numpy as np
import torch

from ..base import StudentError, check, manual_seed, rnd
from .common import (Outcome, attach, call, compare, exception_outcome, functions_ran, gen, reference, run_cases,
                        verdict)
from .fingerprint import match_cases, match_outputs
from .pictures import schedule_curve


def ce_cases(seed):
    def make(k, b, v, scale, shift=0.0):
        def build():
            g = gen(seed, 120 + k)
            return torch.randn(b, v, generator=g) * scale + shift, torch.randint(0, v, (b,), generator=g)
        return build
    # + 100 with a small spread: exp overflows without the max shift, yet no probability underflows (which
    # tells a missing shift from log(softmax(.)), equal on the other cases)
    return [("logits[8, 20]", make(0, 8, 20, 2.0)), ("logits[5, 11] x 1000 (large logits)", make(1, 5, 11, 1000.0)),
            ("logits[1, 50]", make(2, 1, 50, 1.0)), ("logits[6, 20] + 100 (shifted)", make(3, 6, 20, 2.0, 100.0))]


def cross_entropy(ctx):
    return run_cases(ctx, "cross-entropy", ce_cases(ctx.seed), "large logits", redraw=ce_cases,
                     fingerprint=match_cases)


def _params(seed, k, dtype=torch.float32):
    g = gen(seed, k)
    shapes = [(4, 3), (3,), (2, 5, 2)]
    return [torch.nn.Parameter(torch.randn(*s, generator=g).to(dtype)) for s in shapes]


def _grads(params, step, seed, scale):
    """Seeded gradients for one step, the same for the student's and the reference's optimizer."""
    g = gen(seed, 500 + step)
    for p in params:
        p.grad = (torch.randn(p.shape, generator=g).to(p.dtype) * 0.5 + 0.1 * p.detach()) * scale


def _adamw_run(cls, seed, dtype, steps, hp, scale=1.0):
    params = _params(seed, 130, dtype)
    opt = cls(params, **hp)
    for t in range(steps):
        _grads(params, t, seed, scale)
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in params])


def adamw(ctx):
    hp = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    ref_cls = reference().get_adamw_cls()
    try:
        cls = call(ctx, "adamw", (), "get_adamw_cls()")
        if not isinstance(cls, type):
            raise Outcome(check("lm-adamw", "error", {"problem": f"returned {type(cls).__name__}"},
                                "an Optimizer class", "get_adamw_cls() did not return a class",
                                data={"component": "adamw", "kind": "interface", "adapter": "get_adamw_cls"}))
        rows = []
        # gradients of 1e-4: sqrt(v) ~ 1e-5 is then comparable to eps, so where eps goes shows
        for steps, scale in ((1, 1.0), (15, 1.0), (5, 1e-4)):
            desc = f"{steps} steps, lr 1e-2, betas (0.9, 0.95), weight decay 0.1, gradients ~{scale:g}"
            try:
                with ctx.student(f"{cls.__name__}.step()", seconds=ctx.budget(30.0)):
                    got = _adamw_run(cls, ctx.seed, torch.float32, steps, hp, scale)
            except StudentError as e:    # the optimizer's own methods raised: classify like an adapter's
                if isinstance(e.exc, MemoryError):
                    raise
                raise exception_outcome("adamw", e.exc, desc) from None
            ref64 = _adamw_run(ref_cls, ctx.seed, torch.float64, steps, hp, scale)
            ref32 = _adamw_run(ref_cls, ctx.seed, torch.float32, steps, hp, scale)
            rows.append(compare("adamw", desc, got, ref64, ref32))
    except Outcome as o:
        return [o.check]
    c = verdict("adamw", rows, "parameters after 1, 5 and 15 steps, large and tiny gradients")
    c["data"]["functions"] = functions_ran(ctx, "adamw")
    if c["status"] == "fail":
        settings = ((1, 1.0), (15, 1.0), (5, 1e-4))

        def student_out(d):
            try:
                with ctx.student(f"{cls.__name__}.step()", seconds=ctx.budget(30.0)):
                    return [_adamw_run(cls, ctx.seed + 7919 * d, torch.float32, n, hp, sc) for n, sc in settings]
            except StudentError as e:
                raise exception_outcome("adamw", e.exc, "fingerprint draws") from None

        def mutant_out(mod, d, dtype):
            return [_adamw_run(mod.get_adamw_cls(), ctx.seed + 7919 * d, dtype, n, hp, sc) for n, sc in settings]
        attach(c, match_outputs(ctx, "adamw", student_out, mutant_out))
    return [c]


def lr_schedule(ctx):
    ref = reference().run_get_lr_cosine_schedule
    rows, worst, grids, curves = [], None, [], []
    try:
        for hp in ((1.0, 0.1, 7, 21), (3e-4, 3e-5, 10, 100)):
            got, want = [], []
            w, c = hp[2], hp[3]     # all of warmup and its end, the cosine part sampled, the cycle's end and after
            its = sorted(set(range(0, w + 3)) | set(range(w, c, max(1, (c - w) // 12))) | set(range(c - 2, c + 6)))
            grids.append((hp, its))
            curves.append((got, want))
            for it in its:
                v = call(ctx, "lr-schedule", (it, *hp), f"it={it}, max/min/warmup/cycle={hp}")
                try:
                    v = float(v)
                except (TypeError, ValueError):
                    raise Outcome(check("lm-lr-schedule", "error", {"returned": type(v).__name__}, "a number",
                                        f"returned {type(v).__name__} at it={it}",
                                        data={"component": "lr-schedule", "kind": "interface"}))
                got.append(v)
                want.append(float(ref(it, *hp)))
            g, w = torch.tensor(got, dtype=torch.float64), torch.tensor(want, dtype=torch.float64)
            row = compare("lr-schedule", f"max/min/warmup/cycle = {hp}", g, w, w)
            bad = [i for i in range(len(got)) if abs(got[i] - want[i]) > 1e-6 * hp[0] + 1e-12]
            if bad:
                row["ok"] = False
                row["first_bad_it"] = its[bad[0]]
                row["got"], row["want"] = rnd(got[bad[0]], 9), rnd(want[bad[0]], 9)
                worst = worst or row
            rows.append(row)
    except Outcome as o:
        return [o.check]
    c = verdict("lr-schedule", rows, "every iteration through the cycle and past it")
    c["data"]["functions"] = functions_ran(ctx, "lr-schedule")
    if c["status"] == "fail":      # deterministic: one draw of every iteration is the whole function
        def values(fn, student):
            out = []
            for hp, its in grids:
                vals = [float(call(ctx, "lr-schedule", (it, *hp), f"it={it}") if student else fn(it, *hp))
                        for it in its]
                out.append(torch.tensor(vals, dtype=torch.float64))
            return out
        attach(c, match_outputs(ctx, "lr-schedule", lambda d: values(None, True),
                                lambda mod, d, dtype: values(mod.run_get_lr_cosine_schedule, False), draws=1))
    if worst:
        c["detail"] = (f"at it={worst['first_bad_it']} ({worst['case']}) returned {worst['got']}, expected "
                       f"{worst['want']}")
    hp, its = grids[0]          # the report's picture: the first setting, sampled at every iteration
    schedule_curve(ctx, hp, its, *curves[0])
    return [c]


CLIP_CASES = ((3.0, 1.0, "gradients above the limit (clipped)"), (0.01, 1.0, "gradients below the limit (unchanged)"))


def _clip_setup(seed, k, scale, dtype=torch.float32):
    g = gen(seed, 140 + k)
    ps = [torch.nn.Parameter(torch.randn(s, generator=g).to(dtype)) for s in ((5, 4), (7,), (3, 3), (2,))]
    for p in ps[:-1]:
        p.grad = (torch.randn(p.shape, generator=g) * scale).to(dtype)
    ps[-1].requires_grad_(False)        # a frozen parameter without a gradient
    return ps


def _clipped(ctx, fn, seed, dtype=torch.float32, student=False) -> list:
    """The gradients after clipping, per case, as one vector each."""
    out = []
    for k, (scale, max_norm, desc) in enumerate(CLIP_CASES):
        ps = _clip_setup(seed, k, scale, dtype)
        if student:
            call(ctx, "gradient-clipping", (ps, max_norm), desc)
        else:
            fn(ps, max_norm)
        if any(p.grad is None for p in ps[:-1]):
            raise Outcome(check("lm-gradient-clipping", "fail", {"grad": None}, "gradients kept",
                                f"a gradient became None ({desc})", data={"component": "gradient-clipping",
                                                                          "kind": "mismatch", "case": desc}))
        out.append(torch.cat([p.grad.detach().reshape(-1) for p in ps[:-1]]))
    return out


def gradient_clipping(ctx):
    ref = reference().run_gradient_clipping
    try:
        got = _clipped(ctx, None, ctx.seed, student=True)
    except Outcome as o:
        return [o.check]
    want64, want32 = _clipped(ctx, ref, ctx.seed, torch.float64), _clipped(ctx, ref, ctx.seed)
    rows = [compare("gradient-clipping", desc, g.float(), w64, w32)
            for (_, _, desc), g, w64, w32 in zip(CLIP_CASES, got, want64, want32)]
    c = verdict("gradient-clipping", rows, "global norm above and below the limit")
    c["data"]["functions"] = functions_ran(ctx, "gradient-clipping")
    if c["status"] == "fail":
        attach(c, match_outputs(ctx, "gradient-clipping",
                                lambda d: _clipped(ctx, None, ctx.seed + 7919 * d, student=True),
                                lambda mod, d, dtype: _clipped(ctx, mod.run_gradient_clipping, ctx.seed + 7919 * d,
                                                               dtype)))
    return [c]


def _result_made_at(ctx, out, comp: str) -> dict | None:
    """Where a wrong kind of result was made: a generator's function (its def line, in the student's files),
    else the adapter's return (the first student frame returning)."""
    from ... import lm_loader
    code = out.gi_code if type(out).__name__ == "generator" else None
    shown = lm_loader.STATE.files.get(code.co_filename) if code is not None else None
    if shown:
        return {"file": shown, "line": code.co_firstlineno}
    return ctx.cache.get("lm_returned_at", {}).get(comp)


def get_batch(ctx):
    """Properties only (the sampling is random): shapes, dtype, targets shifted by one, windows inside the data."""
    n, b, t = 30, 8, 5
    data = np.arange(n, dtype=np.int64) + 100           # token k sits at index k - 100
    starts, problems, same_rows, n_draws = set(), [], 0, 40
    np.random.seed(ctx.seed)          # numpy or torch, whichever the student samples with: reproducible
    manual_seed(ctx.seed)
    try:
        for draw in range(n_draws):
            out = call(ctx, "get-batch", (data, b, t, "cpu"), f"dataset of {n} tokens, batch {b}, context {t}")
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise Outcome(check("lm-get-batch", "error", {"returned": type(out).__name__}, "(x, y)",
                                    "run_get_batch did not return a pair (x, y)" + (
                                        " (a generator: the function yields instead of returning)"
                                        if type(out).__name__ == "generator" else ""),
                                    data={"component": "get-batch", "kind": "interface"},
                                    location=_result_made_at(ctx, out, "get-batch")))
            x, y = (torch.as_tensor(np.asarray(o.cpu()) if isinstance(o, torch.Tensor) else o) for o in out)
            if tuple(x.shape) != (b, t) or tuple(y.shape) != (b, t):
                problems.append(f"shapes {list(x.shape)} and {list(y.shape)}, expected [{b}, {t}] each")
                break
            if out[0].dtype != torch.long or out[1].dtype != torch.long:
                problems.append(f"dtypes {out[0].dtype}, {out[1].dtype}; expected torch.long (token ids)")
                break
            if not bool((x[:, 1:] == x[:, :-1] + 1).all()):
                problems.append("an input row is not a contiguous window of the dataset")
                break
            if not bool((y == x + 1).all()):
                problems.append("targets are not the inputs shifted by one token (y[i] = dataset[start + i + 1])")
                break
            lo, hi = int(x[:, 0].min()) - 100, int(x[:, 0].max()) - 100
            if lo < 0 or hi > n - t - 1:
                problems.append(f"a window starts at {hi if hi > n - t - 1 else lo}; valid starts are 0..{n - t - 1}")
                break
            starts.update(int(s) - 100 for s in x[:, 0])
            same_rows += int(bool((x == x[:1]).all()))
    except Outcome as o:
        return [o.check]
    if not problems and same_rows == n_draws:   # 8 rows from 25 starts are all equal by chance with p = 25^-7
        problems.append(f"every row of every batch is the same window (in {n_draws} batches of {b})")
    if not problems and len(starts) < 5:
        problems.append(f"only {len(starts)} different window starts in {n_draws * b} samples (not random)")
    # 320 uniform draws from 25 starts miss a given one with p = (24/25)^320 = 2e-6
    for edge, name in ((0, "first"), (n - t - 1, "last")):
        if not problems and edge not in starts:
            problems.append(f"the {name} valid start ({edge}) was never sampled in {n_draws * b} windows: valid "
                            f"starts are 0..{n - t - 1} (len(dataset) - context_length - 1)")
    data_ = {"component": "get-batch", "adapter": "run_get_batch", "starts_seen": sorted(starts)[:40]}
    if problems:
        data_.update(kind="mismatch", case="dataset of 30 tokens")
        # a property observed directly is the mechanism itself (causes: the lm mutants' ids)
        if problems[0].startswith("targets are not the inputs shifted"):
            data_["diagnosis"] = "target-not-shifted"
        elif problems[0].startswith("every row of every batch"):
            data_["diagnosis"] = "get-batch-one-window"
        wrong = data_.get("diagnosis") or ("start-range" if "valid start" in problems[0] else None)
        where = _made_at(ctx, wrong, (data, b, t, "cpu")) if wrong else None
        return [check("lm-get-batch", "fail", {"problem": problems[0]}, "random windows, y = x shifted by one",
                      problems[0], data=data_, location=where)]
    return [check("lm-get-batch", "pass", {"starts": len(starts)}, "random windows, y = x shifted by one",
                  f"{len(starts)} different starts in {n_draws * b} samples, all valid; y = x + 1", data=data_)]


def _made_at(ctx, diagnosis: str, args: tuple) -> dict | None:
    """The student's line that first made the wrong value, from the values their lines assign (numpy has no
    torch ops to record): one-window, the first batch-long value whose entries are all equal (the repeated
    start); start-range, the first batch-long array of integers (the starts, drawn from the range);
    target-not-shifted, the first assignment of the second name holding the returned targets (the
    first is the inputs themselves)."""
    from ... import lm_loader
    from .divergence import run_traced
    files, b = lm_loader.STATE.files, args[1]

    def arrays(frame):
        out = {}
        for k, v in frame.f_locals.items():
            try:                           # a 0-d tensor has no len(); a list of anything is no value
                if isinstance(v, (np.ndarray, torch.Tensor, list, tuple)) and 1 < len(v) <= 4096:
                    out[k] = (id(v), (k, np.asarray(v.detach().cpu() if isinstance(v, torch.Tensor) else v), v))
            except Exception:              # noqa: BLE001 - not a value to compare
                continue
        return out

    def run():
        with ctx.student("run_get_batch (where the batch goes wrong)", seconds=ctx.budget(5.0)):
            return ctx.module.run_get_batch(*args)
    values, out = run_traced(files, arrays, run)
    made = [(shown, line, *kv) for shown, line, kv in values]       # (file, line, name, array, object)
    if diagnosis == "get-batch-one-window":
        hit = next((m for m in made if m[3].shape[:1] == (b,) and m[3].dtype != object
                    and bool((m[3] == m[3][:1]).all())), None)
    elif diagnosis == "start-range":     # the batch's starts are drawn on the line that holds the range
        hit = next((m for m in made if m[3].shape[:1] == (b,) and m[3].size == b
                    and np.issubdtype(m[3].dtype, np.integer)), None)
    elif out and isinstance(out[0], (tuple, list)) and len(out[0]) == 2:
        y = out[0][1]
        want = np.asarray(y.cpu() if isinstance(y, torch.Tensor) else y)
        same = [m for m in made if m[3].shape == want.shape and np.array_equal(m[3], want)]
        names = list(dict.fromkeys(m[2] for m in same))
        hit = next((m for m in same if m[2] == names[1]), None) if len(names) > 1 else (same[0] if same else None)
    else:
        hit = None
    return {"file": hit[0], "line": hit[1]} if hit else None
