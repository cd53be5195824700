"""`lm`, full check only: the student's TransformerLM trained briefly with their own AdamW, cross-entropy,
get_batch, gradient clipping and cosine schedule, beside the reference's on the same data.

The corpus is reference_model/lm_corpus.py (1,018 characters written for mtxdiag, 28 symbols). Both runs
start from the same weights (the reference's own initialisation, loaded through the student's adapter) and
see the same batches (drawn once with the student's run_get_batch; get_batch itself is checked by
lm-get-batch), so a correct student's losses equal the reference's up to float32 rounding, amplified by
training. Measured, in one check `lm-training`:

  first loss     the loss of the first step against ln(vocab) (a model at initialisation guesses uniformly)
  overfit        one batch, OVERFIT_STEPS steps at a constant learning rate: the loss must fall to
                 OVERFIT_RATIO x its first (reference and correct corpus: see the constants)
  curve          CURVE_STEPS steps on the corpus with the schedule and clipping: the largest relative gap to
                 the reference's loss at the same step must stay under CURVE_RTOL
  NaN            the first step and stage (forward, loss, backward, clipping, optimizer step, learning rate)
                 that makes a non-finite value

When one fails, the failure is located by isolation: the same training with every piece the reference's except
one of the student's (model, cross-entropy, clipping, AdamW, schedule); the pieces whose run alone leaves the
reference's curve are the cause (symptom and mechanism both measured), and the location is the first of the
student's functions that piece runs.
"""
from __future__ import annotations

import math
import sys

import numpy as np
import torch

from ....readable import cut, num
from ... import lm_loader
from ..base import StudentError, check, manual_seed, rnd
from .common import classify, reference, student_location
from .model_call import capture, the_model

CFG = {"context_length": 16, "d_model": 16, "num_layers": 2, "num_heads": 2, "d_ff": 32, "rope_theta": 10000.0}
BATCH, CURVE_STEPS, OVERFIT_STEPS = 8, 30, 25
# the cycle ends 8 steps before the training does: the schedule's floor after the cycle is trained on too
HP = {"max_lr": 1e-2, "min_lr": 1e-3, "warmup": 3, "cycle": CURVE_STEPS - 8, "weight_decay": 0.01,
      "betas": (0.9, 0.95), "eps": 1e-8, "clip": 1.0}
# Calibration, measured in-process on the reference and the 6 correct corpus styles (3 repositories, 3 files),
# seeds 0-2 (21 runs): the largest relative gap of a correct curve to the reference's is 0 to 1.54e-5 (float32
# rounding amplified by 30 steps; styles whose get_batch draws like the reference's give 0); CURVE_RTOL is 65x
# that. One batch after 25 steps ends at 0.12-0.21x its first loss (OVERFIT_RATIO 0.5: 2.4x margin). The first
# loss is ln(28) + 0.31..0.69 (FIRST_LOSS_TOL 1.0). Bugs: AdamW without bias correction 0.038 at step 2, with
# coupled decay 0.041 at step 2, decay not scaled by lr 0.11 at step 1; the schedule's warmup off by one 0.074 at
# step 1, cosine over the full cycle 0.018 at step 9; eps inside AdamW's sqrt 1.25e-4 (under the tolerance: it
# changes training by less than the course's tests can see, and lm-adamw names it).
CURVE_RTOL = 1e-3
OVERFIT_RATIO = 0.5       # the one-batch loss after OVERFIT_STEPS, over the first step's
FIRST_LOSS_TOL = 1.0       # |first loss - ln(vocab)|; the reference's initialisation gives ln(V) + 0.3..0.7
RUN_S = 30.0              # one training run of the student's (the reference's: ~0.3 s on an idle core)
PIECES = ("model", "cross-entropy", "gradient-clipping", "adamw", "lr-schedule")
STAGE_COMPONENT = {"forward": "lm", "loss": "cross-entropy", "backward": "lm", "clipping": "gradient-clipping",
                   "step": "adamw", "learning rate": "lr-schedule"}


class NotMeasured(Exception):
    """The training could not be set up (the reason is the check's detail)."""


def corpus() -> tuple[np.ndarray, int]:
    from reference_model import lm_corpus
    return np.array(lm_corpus.tokens(), dtype=np.int64), len(lm_corpus.VOCAB)


def init_weights(seed: int, vocab: int) -> dict:
    from reference_model.lm import TransformerLM
    manual_seed(seed)
    m = TransformerLM(vocab, **CFG)
    return {k: v.detach().clone() for k, v in m.state_dict().items()}


def adapter_args(vocab, weights, x):
    """run_transformer_lm's arguments in the adapter's order: the brief training's config, the weights, the input."""
    c = CFG
    return (vocab, c["context_length"], c["d_model"], c["num_layers"], c["num_heads"], c["d_ff"], c["rope_theta"],
            weights, x)


def student_model(ctx, w0: dict, vocab: int, x0):
    """(forward(x) -> logits, parameters) of the student's model loaded with w0 through their adapter: the
    module the adapter built, called as the adapter called it (model_call.py), or for an adapter that computes
    with the weights themselves, those weights."""
    fn = ctx.module.run_transformer_lm
    out, calls = capture(fn, adapter_args(vocab, {k: v.clone() for k, v in w0.items()}, x0))
    model = the_model(out, calls, x0)
    if model is not None:
        return model, list(model.module.parameters())
    w = {k: v.clone().requires_grad_(True) for k, v in w0.items()}
    probe = fn(*adapter_args(vocab, w, x0))
    # the weights themselves must get a gradient: an output that requires one through a module's own parameters
    # (loaded from copies of the weights) trains a model the next call builds afresh
    grads = torch.autograd.grad(probe.sum(), list(w.values()), allow_unused=True) \
        if isinstance(probe, torch.Tensor) and probe.requires_grad else [None] * len(w)
    if all(g is None for g in grads):
        raise NotMeasured("run_transformer_lm's model could not be found to train (no module whose forward, "
                          "called again as the adapter called it, reproduces the adapter's output, and no "
                          "gradient reaches the weights it is given)")
    # every weight the reference trains must be trained here too: one copied into a module the call builds (out
    # of the gradient's reach) would keep its value, and the curve would leave the reference's for that reason
    # alone, whatever the model the student trains does
    copied = [k for k, g in zip(w, grads) if g is None]
    if copied:
        raise NotMeasured(f"run_transformer_lm computes with copies of {len(copied)} of the {len(w)} weights it "
                          f"is given ({', '.join(copied[:3])}{', ...' if len(copied) > 3 else ''}), out of the "
                          "gradient's reach, and no module of yours, called again as the adapter called it, "
                          "reproduces its output: trained through it those weights would never change")
    return (lambda x: fn(*adapter_args(vocab, w, x))), list(w.values())


class Kit:
    """One training's pieces: each the student's or the reference's."""

    def __init__(self, ctx, mine: set, w0: dict, vocab: int, x0):
        ref = reference()
        m = ctx.module
        self.mine = mine
        if "model" in mine:
            self.forward, self.params = student_model(ctx, w0, vocab, x0)
        else:
            from reference_model.lm import TransformerLM
            model = TransformerLM(vocab, **CFG)
            model.load_state_dict({k: v.clone() for k, v in w0.items()})
            self.forward, self.params = model, list(model.parameters())
        self.ce = m.run_cross_entropy if "cross-entropy" in mine else ref.run_cross_entropy
        self.clip = m.run_gradient_clipping if "gradient-clipping" in mine else ref.run_gradient_clipping
        self.lr = m.run_get_lr_cosine_schedule if "lr-schedule" in mine else ref.run_get_lr_cosine_schedule
        cls = (m.get_adamw_cls if "adamw" in mine else ref.get_adamw_cls)()
        self.opt = cls(self.params, lr=HP["max_lr"], weight_decay=HP["weight_decay"], betas=HP["betas"],
                       eps=HP["eps"])


def _finite(ts) -> bool:
    return all(t is None or bool(torch.isfinite(t).all()) for t in ts)


def train(kit: Kit, batches, steps: int, schedule: bool) -> dict:
    """Losses per step; the first non-finite stage as {"step", "stage"}."""
    losses = []
    for t in range(steps):
        x, y = batches[t % len(batches)]
        lr = float(kit.lr(t, HP["max_lr"], HP["min_lr"], HP["warmup"], HP["cycle"])) if schedule else HP["max_lr"]
        if not math.isfinite(lr):
            return {"loss": losses, "nan": {"step": t, "stage": "learning rate"}}
        for g in kit.opt.param_groups:
            g["lr"] = lr
        for p in kit.params:
            p.grad = None
        logits = kit.forward(x)
        if not _finite([logits]):
            return {"loss": losses, "nan": {"step": t, "stage": "forward"}}
        loss = kit.ce(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        losses.append(float(loss.detach()))
        if not _finite([loss]):
            return {"loss": losses, "nan": {"step": t, "stage": "loss"}}
        loss.backward()
        if not _finite([p.grad for p in kit.params]):
            return {"loss": losses, "nan": {"step": t, "stage": "backward"}}
        kit.clip(kit.params, HP["clip"])
        if not _finite([p.grad for p in kit.params]):
            return {"loss": losses, "nan": {"step": t, "stage": "clipping"}}
        kit.opt.step()
        if not _finite([p.detach() for p in kit.params]):
            return {"loss": losses, "nan": {"step": t, "stage": "step"}}
    return {"loss": losses, "nan": None}


def gap(got: list, want: list) -> tuple[float, int | None]:
    """(largest relative gap, the first step over CURVE_RTOL or None); a run that stopped early is infinitely far."""
    worst, first = 0.0, None
    for t, w in enumerate(want):
        g = got[t] if t < len(got) else math.inf
        d = abs(g - w) / max(abs(w), 1e-6) if math.isfinite(g) else math.inf
        worst = max(worst, d)
        if first is None and d > CURVE_RTOL:
            first = t
    return worst, first


def _first_function(fn):
    """The first of the student's functions (not a constructor, not an adapter: the code behind it) that fn() runs,
    as {file, line, function}; an adapter when it runs nothing else of theirs; None when nothing of theirs ran."""
    from ....lm_table import ADAPTER
    files, seen = lm_loader.STATE.files, []

    def trace(frame, event, arg):
        co = frame.f_code
        if event == "call" and co.co_filename in files and len(seen) < 20 and "__init__" not in co.co_name \
                and "<" not in co.co_name:
            seen.append({"file": files[co.co_filename], "line": co.co_firstlineno,
                         "function": getattr(co, "co_qualname", co.co_name)})
        return None
    old = sys.gettrace()
    sys.settrace(trace)
    try:
        fn()
    except Exception:            # noqa: BLE001 - only the location is wanted; the failure is already measured
        pass
    finally:
        sys.settrace(old)
    adapters = set(ADAPTER.values())
    return min(seen, key=lambda f: f["function"] in adapters) if seen else None


def _where(piece: str, kit: Kit, batches):
    x, y = batches[0]
    if piece == "model":
        return _first_function(lambda: kit.forward(x))
    if piece == "cross-entropy":
        logits = torch.randn(4, 7)
        return _first_function(lambda: kit.ce(logits, torch.arange(4)))
    if piece == "gradient-clipping":
        for p in kit.params:
            p.grad = torch.ones_like(p)
        return _first_function(lambda: kit.clip(kit.params, HP["clip"]))
    if piece == "adamw":
        for p in kit.params:
            p.grad = torch.ones_like(p)
        return _first_function(kit.opt.step)
    return _first_function(lambda: kit.lr(3, HP["max_lr"], HP["min_lr"], HP["warmup"], HP["cycle"]))


def _batches(ctx, data):
    """CURVE_STEPS batches from the student's run_get_batch (seeded), or the reference's when theirs cannot give
    (x, y) of the right shape and dtype (lm-get-batch says why)."""
    np.random.seed(ctx.seed)
    manual_seed(ctx.seed)
    out = []
    try:
        for _ in range(CURVE_STEPS):
            x, y = ctx.module.run_get_batch(data, BATCH, CFG["context_length"], "cpu")
            x, y = torch.as_tensor(x).long(), torch.as_tensor(y).long()
            if tuple(x.shape) != (BATCH, CFG["context_length"]) or x.shape != y.shape:
                raise ValueError("shape")
            out.append((x, y))
        return out, "yours"
    except Exception:           # noqa: BLE001 - get_batch is judged by lm-get-batch, not here
        np.random.seed(ctx.seed)
        return [reference().run_get_batch(data, BATCH, CFG["context_length"], "cpu")
                for _ in range(CURVE_STEPS)], "the reference's (yours did not return batches)"


def timed(ctx, what: str, fn):
    """fn() as the student's code, within RUN_S seconds (stretched on a slow machine); NotMeasured, the
    harness's own, stays itself."""
    try:
        with ctx.student(what, seconds=ctx.budget(RUN_S)):
            return fn()
    except StudentError as e:
        if isinstance(e.exc, NotMeasured):
            raise e.exc from None
        raise


def _sig(v, n=4):
    return float(f"{v:.{n}g}") if isinstance(v, float) and math.isfinite(v) else None


def brief_training(ctx):
    """The check lm-training (see the module's docstring)."""
    needed = ("run_transformer_lm", "run_cross_entropy", "run_gradient_clipping", "get_adamw_cls",
              "run_get_lr_cosine_schedule", "run_get_batch")
    missing = [n for n in needed if getattr(ctx.module, n, None) is None]
    if missing:
        return [check("lm-training", "skip", None, "", f"not trained: {', '.join(missing)} not defined",
                      data={"kind": "absent"})]
    data, vocab = corpus()
    w0 = init_weights(ctx.seed, vocab)
    mine = set(PIECES)
    try:
        batches, source = timed(ctx, "run_get_batch (the training's batches)", lambda: _batches(ctx, data))
        x0 = batches[0][0]
        ref_curve = train(Kit(ctx, set(), w0, vocab, x0), batches, CURVE_STEPS, True)
        ref_fit = train(Kit(ctx, set(), w0, vocab, x0), batches[:1], OVERFIT_STEPS, False)
        curve = timed(ctx, "your training on the corpus",
                      lambda: train(Kit(ctx, mine, w0, vocab, x0), batches, CURVE_STEPS, True))
        fit = timed(ctx, "your training on one batch",
                    lambda: train(Kit(ctx, mine, w0, vocab, x0), batches[:1], OVERFIT_STEPS, False))
        first = curve["loss"][0] if curve["loss"] else math.nan
        worst, step = gap(curve["loss"], ref_curve["loss"])
        fit_end = fit["loss"][-1] if fit["loss"] and not fit["nan"] else math.inf
        problems = []
        if not (math.isfinite(first) and abs(first - math.log(vocab)) <= FIRST_LOSS_TOL):
            problems.append(f"the first loss is {num(first, '.3g')}; a model at initialisation guesses about uniformly: "
                            f"ln({vocab}) = {math.log(vocab):.3g} (+- {FIRST_LOSS_TOL:g})")
        for name, run in (("the corpus", curve), ("one batch", fit)):
            if run["nan"]:
                problems.append(f"a non-finite value at step {run['nan']['step']} ({run['nan']['stage']}) "
                                f"training on {name}")
        if not fit["nan"] and not fit_end <= OVERFIT_RATIO * fit["loss"][0]:
            problems.append(f"one batch is not learnt: the loss goes from {fit['loss'][0]:.3g} to {fit_end:.3g} in "
                            f"{OVERFIT_STEPS} steps (the reference: to {ref_fit['loss'][-1]:.3g}; at most "
                            f"{OVERFIT_RATIO:g} x the first expected)")
        if step is not None and not curve["nan"]:
            problems.append(f"the loss leaves the reference's at step {step} ({curve['loss'][step]:.4g} vs "
                            f"{ref_curve['loss'][step]:.4g}; largest relative gap {worst:.2g}, at most "
                            f"{CURVE_RTOL:g} expected)")
        culprits, isolation = [], {}
        if problems:
            for piece in PIECES:
                run = timed(ctx, f"training with only your {piece}",
                            lambda piece=piece: train(Kit(ctx, {piece}, w0, vocab, x0), batches, CURVE_STEPS, True))
                g, s = gap(run["loss"], ref_curve["loss"])
                isolation[piece] = {"gap": _sig(g, 3), "step": s, "nan": run["nan"]}
                if s is not None or run["nan"]:
                    culprits.append(piece)
            nan = curve["nan"] or fit["nan"]
            if not culprits and nan:
                culprits = ["model" if STAGE_COMPONENT[nan["stage"]] == "lm" else
                            STAGE_COMPONENT[nan["stage"]]]
        where = timed(ctx, f"your {culprits[0]} (where the training goes wrong)", lambda: _where(
            culprits[0], Kit(ctx, mine, w0, vocab, x0), batches)) if culprits else None
    except StudentError as e:
        if isinstance(e.exc, MemoryError):
            raise
        # not measured: an adapter that raises here raises on its own check too, which says why (a skip, so that
        # one exception is not a second diagnosis; checks.not_measured reads the kind); where it raised stays
        kind = "not-implemented" if classify(e.exc) == "not-implemented" else "error"
        return [check("lm-training", "skip", {"error": f"{type(e.exc).__name__}: {cut(e.exc, 200)}"}, "",
                      f"not trained: {e.where} raised {type(e.exc).__name__}: {cut(e.exc, 300)}",
                      data={"kind": kind, "could_not_measure": "the student's code raised"},
                      location=student_location(e.exc.__traceback__))]
    except NotMeasured as e:
        return [check("lm-training", "skip", None, "", f"not trained: {e}", data={"could_not_measure": str(e)})]
    ctx.artifacts["lm_training"] = {
        "loss": [_sig(v) for v in curve["loss"]], "ref": [_sig(v) for v in ref_curve["loss"]],
        "overfit": [_sig(v) for v in fit["loss"]], "overfit_ref": [_sig(v) for v in ref_fit["loss"]],
        "ln_vocab": _sig(math.log(vocab)), "vocab": vocab, "batches": source, "nan": curve["nan"] or fit["nan"],
        "config": dict(CFG, batch=BATCH, **{k: v for k, v in HP.items() if k != "betas"})}
    measured = {"first_loss": rnd(first, 4), "ln_vocab": rnd(math.log(vocab), 4), "overfit_loss": rnd(fit_end, 4),
                "reference_overfit_loss": rnd(ref_fit["loss"][-1], 4), "curve_gap": _sig(worst, 3) if math.isfinite(worst) else "inf",
                "curve_gap_step": step}
    expected = (f"first loss ln(V) +- {FIRST_LOSS_TOL:g}; one batch to {OVERFIT_RATIO:g} x its first loss in "
                f"{OVERFIT_STEPS} steps; "
                f"the corpus curve within {CURVE_RTOL:g} (relative) of the reference's for {CURVE_STEPS} steps")
    if not problems:
        return [check("lm-training", "pass", measured, expected,
                      f"first loss {first:.3g} (ln V {math.log(vocab):.3g}); one batch to {fit_end:.3g} in "
                      f"{OVERFIT_STEPS} steps; the curve within {worst:.2g} of the reference's",
                      data={"kind": "training"})]
    comp = {"model": "lm"}.get(culprits[0], culprits[0]) if culprits else None
    alone = "; ".join(f"only your {p}: " + ("NaN at step {step} ({stage})".format(**i["nan"]) if i["nan"] else
                                            (f"leaves it at step {i['step']}" if i["step"] is not None else
                                             f"stays within {i['gap']:.2g}"))
                      for p, i in isolation.items())
    detail = problems[0] + (f"; located by training with one piece of yours at a time (the rest the reference's): "
                            f"{alone}" if isolation else "")
    return [check("lm-training", "fail", measured, expected, detail,
                  data={"kind": "training", "component": comp, "culprits": culprits, "isolation": isolation,
                        "problems": problems, "nan": curve["nan"] or fit["nan"]}, location=where)]
