"""The student's own train(), traced; overfitting one batch; brief training and decoding.

The trace runs train() on a tiny model (cheap steps) with the student's own
defaults for lr and warmup, recording at every optimizer step the learning
rate, and on the first step what was fed to the model, what was handed to the
loss, and the gradient the loss sends to logits at PAD targets.
"""
from __future__ import annotations

import time

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from ...checks import bound, num, value
from ..intercept import StepLosses, watch
from . import locate
from .base import Skip, StudentError, check, manual_seed, rnd
from .base import caller_line as _caller_line
from .common import PAD, default, kwargs_for, small_model
from .train_forwards import ForwardTap, runs_model_check
from .train_groups import coverage, selection_line
from .train_schedule import ramp


def _trace(ctx, model, steps, batch_size):
    """Run the student's train(model, steps=...) with its mechanics measured at every optimizer step.

    The recorder (a torch function mode: it costs every torch call of the loop, ~40% of the trace on the
    stub, ~15% of training the real model) sees the first step, whose loss call the rules read; the later
    steps' losses are tapped (intercept.StepLosses)."""
    fn = ctx.need("train")
    lrs, norms, seen = [], [], {}

    clipped = []   # what clip_grad_norm_ returned this step: the norm before clipping

    fresh, mech = {}, {"grad_residual": [], "eval_steps": 0, "sched_epochs": [], "grad_line": None}
    watched = [p for p in model.parameters() if p.requires_grad][:3]

    def on_grad(i):
        def hook(g):                 # this backward's own gradient, before it accumulates into .grad
            fresh[i] = fresh[i] + g.detach() if i in fresh else g.detach().clone()
            mech["grads_seen"] = True
        return hook
    grad_hooks = [p.register_hook(on_grad(i)) for i, p in enumerate(watched)]
    real_train = model.train

    def train_mode(mode=True):         # model.eval() calls self.train(False): where train() switches it
        if not mode and mech.get("eval_line") is None:
            mech["eval_line"] = _eval_origin(ctx, _line_in(ctx, "train"), _caller_line(ctx))
        return real_train(mode)
    model.train = train_mode

    def on_step(opt, args, kwargs):
        losses.at_step(len(lrs) + 1)
        if "step_line" not in mech:
            mech["step_line"] = _caller_line(ctx)
            stepped = {id(p) for g in opt.param_groups for p in g["params"]}
            mech["not_stepped"] = [n for n, p in model.named_parameters() if p.requires_grad and id(p) not in stepped]
            mech["trainable"] = sum(1 for p in model.parameters() if p.requires_grad)
            mech["optimizer"] = type(opt).__name__
            mech["base_lr"] = opt.param_groups[0].get("initial_lr")   # set by a scheduler: the lr it scales
        _mechanics(ctx, model, opt, watched, fresh, mech)
        lrs.append(float(opt.param_groups[0].get("lr", float("nan"))))
        if clipped:
            norms.append(float(clipped[-1]))
            clipped.clear()
        elif len(norms) < 50 or len(norms) % 10 == 0:
            g = [p.grad.detach().float().norm() for grp in opt.param_groups for p in grp["params"] if p.grad is not None]
            norms.append(float(torch.stack(g).norm()) if g else 0.0)
        else:
            norms.append(None)

    def pre(args):                   # each forward pass of the model, however train() runs it (train_forwards)
        mech["forwards"] = mech.get("forwards", 0) + 1
        mech["last_mode"] = model.training
        if "tgt_in" not in seen and len(args) >= 2:
            seen["src"], seen["tgt_in"] = args[0], args[1]
            seen["call_line"] = _caller_line(ctx)

    def post(out):
        logits = out[0] if isinstance(out, (tuple, list)) else out
        if "logits" not in seen and isinstance(logits, torch.Tensor) and logits.requires_grad:
            seen["logits"] = logits
            logits.register_hook(lambda g: seen.setdefault("dlogits", g.detach()))
        return out
    real_clip = torch.nn.utils.clip_grad_norm_

    def clip(*a, **k):
        out = real_clip(*a, **k)
        clipped.append(float(out))
        return out
    torch.nn.utils.clip_grad_norm_ = clip
    h0 = register_optimizer_step_pre_hook(on_step)
    tap = ForwardTap(model, pre, post)
    h3 = _other_forwards(ctx, model, mech)
    rec = watch(ctx.source.code_path, keep_outputs=("cross_entropy", "nll_loss"), limit=4 * steps + 100,
                   only=("cross_entropy", "nll_loss"), depth=4)     # the callers: a loss in forward()'s target
    losses = StepLosses(rec)
    kw = kwargs_for(fn, steps=steps, batch_size=batch_size, device=ctx.device, log_every=10 ** 9)
    t = time.perf_counter()
    try:
        with rec, ctx.student("train(model, ...)", seconds=ctx.budget(30 + steps * 0.1)):
            try:
                tap.on()           # inside the student call: the guard compares the classes around it
                fn(model, **kw)
            finally:
                mech["counted"] = tap.intact()
                tap.off()          # both before the guard's check at the end of the student call
                losses.tap.off()
    finally:
        tap.off()
        h0.remove(), h3.remove()
        for h in grad_hooks:
            h.remove()
        del model.train
        torch.nn.utils.clip_grad_norm_ = real_clip
    return {"lrs": lrs, "norms": norms, "losses": [rnd(v) for v in losses.values()], "seen": seen, "rec": rec, "seconds": time.perf_counter() - t,
            "mech": mech}


def _other_forwards(ctx, model, mech):
    """Where train() runs a model other than the one it was given (a global `model`): the first such line."""
    mine = {id(m) for m in model.modules()}

    def hook(mod, args):
        if id(mod) not in mine and "other_forward_line" not in mech and \
                type(mod).__module__ == getattr(ctx.module, "__name__", None):
            mech["other_forward_line"] = _caller_line(ctx)
    return torch.nn.modules.module.register_module_forward_pre_hook(hook)


def _mechanics(ctx, model, opt, watched, fresh, mech):
    """At an optimizer step: is .grad this step's gradient? train mode? how far has each scheduler stepped?"""
    try:
        _measure_step(ctx, model, opt, watched, fresh, mech)
    except Exception as e:   # runs inside the student's optimizer.step(): a harness slip must not look like theirs
        mech.setdefault("harness_error", f"{type(e).__name__}: {e}")
        fresh.clear()


def _measure_step(ctx, model, opt, watched, fresh, mech):
    import sys
    if len(mech["grad_residual"]) < 12 and fresh:
        worst = 0.0
        stepped = {id(q) for g in opt.param_groups for q in g["params"]}
        for i, p in enumerate(watched):
            if id(p) not in stepped:
                continue                                   # its .grad is nobody's business: not optimised
            g, f = p.grad, fresh.get(i)
            if f is not None and not bool(torch.isfinite(f).all()):
                mech.setdefault("nonfinite_step", len(mech["grad_residual"]) + 1)
                continue                                   # a NaN gradient measures nothing here
            if f is None or float(f.norm()) == 0.0:
                continue
            if g is None:                                  # zeroed (set to None) after backward, before step
                g = torch.zeros_like(f)
            g, f = g.detach().flatten().double(), f.flatten().double()
            a = float(g @ f) / float(f @ f)               # clipping and unscaling only scale the gradient
            worst = max(worst, float((g - a * f).norm()) / max(float(g.norm()), 1e-30) if a > 0 else 1.0)
            mech.setdefault("ratio", []).append(float(g.norm() / f.norm()))
        mech["grad_residual"].append(worst)
        if worst > 1e-3 and mech["grad_line"] is None:
            mech["grad_line"] = _caller_line(ctx)
    fresh.clear()
    mech["eval_steps"] += 0 if mech.get("last_mode", True) else 1
    f = sys._getframe(1)
    while f is not None:       # schedulers the student's train() holds, and how often they were stepped
        if f.f_code.co_filename == ctx.source.code_path:
            held = list(f.f_locals.values())
            held += [x for v in held if hasattr(v, "__dict__") and not isinstance(v, torch.nn.Module)
                     for x in list(vars(v).values())]         # a Trainer object's attributes too
            epochs = [getattr(v, "last_epoch", None) for v in held
                      if isinstance(v, torch.optim.lr_scheduler.LRScheduler)]
            epochs = [int(e) for e in epochs if isinstance(e, int)]   # ChainedScheduler has none of its own
            if epochs:
                mech["sched_epochs"].append(max(epochs))
            break
        f = f.f_back


class Stub(torch.nn.Module):
    """A stand-in model whose step costs ~nothing: the trace is about train(), not the model.

    It maps each decoder input token to logits, so the loss, its target, the
    gradient at PAD targets and the optimizer's learning rate are all real.
    """

    def __init__(self, vocab=13):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, vocab)
        self.generator = torch.nn.Linear(vocab, vocab)

    def forward(self, src, tgt, *rest, **kw):
        return self.generator(self.emb(tgt)), []                  # (B, T, V)




def _low_lr_line(min_peak, peak, mech, lr_line, sched_line):
    """Where a schedule that fails comes from: a peak too low while the optimizer's own lr is fine is the
    scheduler's factor (a lambda that multiplies by lr again); else the lr's value; a fine peak reached
    wrongly is the schedule."""
    if min_peak.ok(peak):
        return sched_line
    base = mech.get("base_lr")
    return sched_line if isinstance(base, float) and min_peak.ok(base) else lr_line


def trace(ctx):
    fn = ctx.need("train")
    from .roles.remote import RemoteCallable
    if isinstance(fn, RemoteCallable):      # split (issue 45): its optimizer's steps happen in the model server
        raise Skip("the training trace is not measured over the model server yet: train() runs there and its "
                   "optimizer's steps, gradients and schedule are not recorded back (issue 45's trial)")
    warmup = default(fn, "warmup", 400)
    warmup = int(warmup) if isinstance(warmup, (int, float)) else 400
    steps = max(20, min(warmup + 40, 2000))
    manual_seed(ctx.seed)
    make = (lambda: Stub().to(ctx.device))
    try:
        tr = _trace(ctx, make(), steps, batch_size=4)
        real = coverage(ctx)       # the stub's 3 parameters prove little about the model's param groups
    except StudentError:  # train() needs more of the model than the stub has: trace a tiny real one
        make, real = (lambda: small_model(ctx, dropout=0.0)), None
        tr = _trace(ctx, make(), steps, batch_size=4)
    tr["mech"]["make_model"] = make
    if real is not None:
        tr["mech"]["not_stepped"], tr["mech"]["trainable"] = real["missing"], real["trainable"]
    lrs, seen, rec = tr["lrs"], tr["seen"], tr["rec"]
    ctx.artifacts["trace"] = {"lr": [rnd(v, 8) for v in lrs[:800]], "loss": tr["losses"][:800]}
    checks = []
    if not lrs:
        return [check("lr-schedule", "fail", None, "the optimizer steps", "train() never called optimizer.step()")]
    peak, first = max(lrs), lrs[0]
    reach = next((i + 1 for i, v in enumerate(lrs) if v >= 0.99 * peak), None)
    min_peak, peak_l, warm_l = bound("lr-schedule"), value("lr-schedule", "lesson_peak"), \
        value("lr-schedule", "lesson_warmup")
    # RAdam rectifies the early variance a warmup guards against (the no-warmup rule exempts it too)
    radam = tr["mech"].get("optimizer") == "RAdam"
    lr_ok = min_peak.ok(peak) and (radam or first <= value("lr-schedule", "first_share") * peak)
    lr_line, sched_line = locate.optimizer_lines(ctx)
    checks.append(check("lr-schedule", "pass" if lr_ok else "fail",
                        {"first": first, "peak": peak, "peak_step": reach, "steps": len(lrs)},
                        f"warmup from ~0 to a peak {min_peak} (lesson: {num(peak_l / warm_l)} at step 1, "
                        f"{num(peak_l)} at step {warm_l})",
                        f"lr {first:.2e} at step 1, peak {peak:.2e} first reached at step {reach} of {len(lrs)}",
                        data={"first": first, "peak": peak, "peak_step": reach, "warmup_default": warmup,
                              "optimizer": tr["mech"].get("optimizer")},
                        location=None if lr_ok else ctx.where(_low_lr_line(min_peak, peak, tr["mech"], lr_line,
                                                                           sched_line))))
    checks.append(ramp(ctx, lrs, warmup, sched_line))
    checks += _mechanics_checks(ctx, tr["mech"], len(lrs), sched_line, lr_low=not lr_ok)
    ce = [c for c in rec.ops if c.name in ("cross_entropy", "nll_loss")]
    if not ce or "tgt_in" not in seen:
        checks.append(check("train-shift", "skip", None, "", "no cross_entropy/nll_loss call observed in train()"))
        return checks
    c = ce[0]
    target = c.args[1] if len(c.args) > 1 else c.kwargs.get("target")
    tgt_in = seen["tgt_in"]
    line = c.line
    if not isinstance(target, torch.Tensor) or target.numel() % tgt_in.size(0):
        checks.append(check("train-shift", "skip", None, "", "the loss target does not match the batch"))
        return checks
    target = target.reshape(tgt_in.size(0), -1)
    same = shifted = None
    if target.shape == tgt_in.shape:
        real = tgt_in != PAD
        same = float((target == tgt_in)[real].float().mean())
        shifted = float((target[:, :-1] == tgt_in[:, 1:])[real[:, 1:]].float().mean())
    ok = same is not None and shifted is not None and shifted > 0.95 and same < 0.5
    target_line, target_def = locate.loss_target_lines(ctx, line, c.lines[1:])
    if not ok:
        from .common import SOS
        # Input starting with SOS means the input is right and the labels are wrong, else the other way round.
        fed_sos = bool((tgt_in[:, 0] == SOS).all())
        line = (target_def or target_line) if fed_sos else (seen.get("call_line") or line)
    checks.append(check("train-shift", "pass" if ok else "fail",
                        {"label_equals_input": rnd(same, 3) if same is not None else None,
                         "label_is_next_input": rnd(shifted, 3) if shifted is not None else None},
                        "labels are the decoder input shifted by one (label[t] = input[t+1])",
                        f"fraction of real positions where the label equals the decoder input at the same position: "
                        f"{same if same is None else round(same, 3)}",
                        data={"target_shape": list(target.shape), "input_shape": list(tgt_in.shape)},
                        location=ctx.where(line if not ok else None)))
    ign = c.kwargs.get("ignore_index", None)
    dl = seen.get("dlogits")
    pad_grad = None
    if dl is not None and dl.dim() == 3 and dl.shape[:2] == target.shape:
        at_pad = target == PAD
        if at_pad.any():
            pad_grad = float(dl[at_pad].abs().sum() / dl.abs().sum().clamp_min(1e-20))
    status = "skip" if pad_grad is None else "pass" if pad_grad < 1e-6 else "fail"
    checks.append(check("train-pad-ignored", status, rnd(pad_grad, 6) if pad_grad is not None else None,
                        "0: PAD targets send no gradient (ignore_index=PAD)",
                        f"share of the loss gradient that comes from PAD target positions; ignore_index={ign}",
                        data={"ignore_index": ign}, location=ctx.where(target_line if status == "fail" else None)))
    return checks


def _nan_origin(ctx, make_model) -> dict | None:
    """Two steps of train() again with every op recorded: the first op whose output is NaN."""
    from . import trace as optrace
    fn = ctx.need("train")
    tr = optrace.recorder(ctx.source.code_path, limit=4000)
    manual_seed(ctx.seed)
    model = make_model()
    try:
        with tr, ctx.student("train(model, steps=2)"):
            fn(model, **kwargs_for(fn, steps=2, batch_size=4, device=ctx.device, log_every=10 ** 9))
    except Exception:
        pass
    return optrace.describe(ctx, optrace.first_nan(tr.ops), "NaN in training")


def _other_model_line(ctx) -> int | None:
    """The line in train() that makes the model it actually trains (a copy, or a new one)."""
    for fn in locate.functions(ctx, "train"):
        calls = locate.calls_named(fn, "deepcopy", "copy", "MiniTransformer")
        if calls:
            return calls[0].lineno
    return None


def _optimizer_call_line(ctx) -> int | None:
    """The line in train() that builds the optimizer (Adam(...), AdamW(...), SGD(...))."""
    for fn in locate.functions(ctx, "train"):
        calls = locate.calls_named(fn, "Adam", "AdamW", "SGD", "RMSprop", "Adagrad", "RAdam", "NAdam", "Adamax")
        if calls:
            return calls[0].lineno
    return None


def _eval_origin(ctx, in_train, innermost):
    """Where train()'s model was switched to eval mode: the model.eval() itself when a helper of the student's
    own makes it (a logging accuracy that never switches back), but train()'s call when the helper is a function
    of the contract that must evaluate (greedy_decode: train() must switch back after calling it)."""
    from ...assignments import assignment_of
    fn = locate.enclosing_function(ctx, innermost) if innermost else None
    contract = set(assignment_of(ctx.assignment).required) | set(assignment_of(ctx.assignment).optional)
    if fn is None or fn.name == "train" or fn.name in contract:
        return in_train or innermost
    return innermost


def _line_in(ctx, fn_name: str) -> int | None:
    """The line that the student's function `fn_name` is running now (an outer frame of the stack)."""
    import sys
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_filename == ctx.source.code_path and f.f_code.co_name == fn_name:
            return f.f_lineno
        f = f.f_back
    return None


def _zero_grad_line(ctx):
    """The zero_grad call in train() that sits after backward() (the one to move), else the step's line."""
    for fn in locate.functions(ctx, "train"):
        back = locate.lines_mentioning(fn, ".backward(")
        zero = locate.lines_mentioning(fn, "zero_grad")
        late = [z for z in zero if back and z > min(back)]
        if late:
            return late[0]
    return None


def _mechanics_checks(ctx, mech, steps, sched_line, lr_low=False):
    """Training-loop mechanics traced on the student's own train(): zeroed gradients, train mode, scheduler."""
    out = []
    res = mech["grad_residual"][1:]                   # from step 2: step 1 starts from no gradient anyway
    if mech.get("nonfinite_step"):
        div = _nan_origin(ctx, mech["make_model"])
        out.append(check("train-finite", "fail", mech["nonfinite_step"], "finite gradients at every step",
                         f"the gradient of train()'s loss is NaN/inf from step {mech['nonfinite_step']}" +
                         (f"; {div['text']}" if div else ""), data={"divergence": div},
                         location=ctx.where(div["line"]) if div else None))
        res = []                                       # the other mechanics cannot be measured on NaN
    if res:
        worst = max(res)
        ratio = max(mech.get("ratio") or [1.0])
        kind = "accumulates" if worst > 1e-3 and ratio > 1.0 else "zero" if ratio < 1e-6 else \
            "other" if worst > 1e-3 else None
        text = {"accumulates": "from the second step on, .grad is larger than the step's own gradient and points "
                               "elsewhere: gradients of earlier steps are still in it (never zeroed)",
                "zero": "the optimizer steps with a zero gradient: it is zeroed after backward() and before step()",
                "other": "the optimizer steps with a gradient that is not this step's", None: ""}[kind]
        out.append(check("train-zero-grad", "fail" if kind else "pass", rnd(worst, 6),
                         "< 1e-3: .grad at each step is that step's gradient (up to clipping's scale)",
                         f"worst relative residual of .grad against the gradient of the step's own backward over "
                         f"steps 2-{len(res) + 1}",
                         data={"mechanism": {"kind": kind, "text": text}} if kind else {},
                         location=ctx.where(_zero_grad_line(ctx) if kind == "zero" else
                                            locate.accumulation_line(ctx, mech["grad_line"]) if kind == "accumulates"
                                            else mech["grad_line"])
                         if kind else None))
    if "not_stepped" in mech:
        miss, total = mech["not_stepped"], mech.get("trainable", 0)
        opt_line = locate.optimizer_lines(ctx)[1] if miss else None
        none = bool(miss) and len(miss) == total     # not a subset: the optimizer steps another model altogether
        out.append(check("train-optimizer-params", "pass" if not miss else "fail", len(miss),
                         "0: the optimizer holds every trainable parameter",
                         ("the optimizer that steps holds none of the parameters of the model train() was given: "
                          "train() trains another model (a copy?)" if none else
                          "trainable parameters of the model that no optimizer param group holds" +
                          (f": {', '.join(miss[:6])}" if miss else "")),
                         data={"mechanism": {"kind": "other-model" if none else "subset", "text": ""}},
                         location=ctx.where((_other_model_line(ctx) if none else selection_line(ctx)) or _optimizer_call_line(ctx)
                                            or opt_line) if miss else None))
    if steps:
        out.append(runs_model_check(ctx, mech, steps))
        frac = mech["eval_steps"] / steps
        evals = [mech["eval_line"]] if mech.get("eval_line") else \
            [ln for fn in locate.functions(ctx, "train") for ln in locate.lines_mentioning(fn, ".eval()")]
        out.append(check("train-mode", "pass" if frac <= 0.5 else "fail", rnd(frac, 3),
                         "<= 0.5: the model is in train mode for the forward passes it learns from",
                         f"share of optimizer steps whose forward pass ran with model.training False "
                         f"({mech['eval_steps']} of {steps})",
                         location=ctx.where(evals[0]) if frac > 0.5 and evals else None))
    ep = mech["sched_epochs"]
    if len(ep) >= 10:
        moved = max(ep) - min(ep)
        # never stepped; or stepped on under 10% of the optimizer steps while the lr never leaves its start
        # (stepped only when logging, say): a per-epoch schedule that reaches its lr is a design, not a bug
        rare = moved < 0.1 * len(ep) and lr_low
        bad = moved == 0 or rare
        where = mech.get("step_line") or sched_line
        if rare:         # the scheduler's own .step() call, the one in the wrong place
            steps_at = [ln for fn in locate.functions(ctx, "train") for ln in locate.lines_mentioning(fn, ".step()")
                        if ln != mech.get("step_line")]
            where = steps_at[0] if steps_at else where
        out.append(check("train-scheduler", "fail" if bad else "pass", moved,
                         "> 0, and as often as the optimizer while the lr has not reached its peak",
                         f"scheduler.last_epoch advanced {moved} time(s) over {len(ep)} optimizer steps",
                         location=ctx.where(where) if bad else None))
    return out


run_train = _trace   # public: decoding.py runs the same brief training of train()

