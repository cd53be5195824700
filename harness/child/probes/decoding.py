"""greedy_decode, and what a briefly trained model does: accuracy, cross-attention pattern."""
from __future__ import annotations

import math

import torch

from ...checks import value
from ...readable import num
from ..intercept import attention_weights, watch
from .base import NotRun, Skip, check, manual_seed, rnd
from .common import PAD, batch, eval_model, kwargs_for
from .training import run_train as _trace


def encoder_calls(ctx):
    """The encoder runs once per greedy_decode call, and the model is left in eval mode."""
    decode = ctx.need("greedy_decode")
    model = eval_model(ctx)
    model.train()
    if not hasattr(model, "encode"):
        raise Skip("MiniTransformer has no encode()")
    n, rows = [0], [0]
    real = model.encode
    lines = []

    def counting(*a, **k):
        n[0] += 1
        if a and isinstance(a[0], torch.Tensor):
            rows[0] += _sequences(a[0], src.size(1))
        from .base import caller_line as _caller_line
        lines.append(_caller_line(ctx))
        return real(*a, **k)
    model.encode = counting
    src, _ = batch(ctx, 2, 6, 6, seed_offset=30)
    try:
        with ctx.student("greedy_decode(model, src)"):
            ys, _ = decode(model, src, **kwargs_for(decode, max_len=20))
    finally:
        model.encode = real
    steps = int(ys.size(1)) - 1 if isinstance(ys, torch.Tensor) and ys.dim() == 2 else None
    # once per source sequence: one call for the batch, or one per sequence when decoding them one at a time
    ok = rows[0] <= src.size(0) if rows[0] else n[0] <= 1
    checks = [check("decode-encoder-calls", "pass" if ok else "fail", n[0], "1 per greedy_decode call",
                    f"model.encode ran {n[0]} time(s) on {rows[0]} source row(s) for a batch of {src.size(0)} while "
                    f"generating {steps} token(s)",
                    location=ctx.where(lines[-1] if not ok and lines else None)),
              check("decode-eval", "pass" if not model.training else "fail", "eval" if not model.training else "train",
                    "greedy_decode puts the model in eval mode (dropout off)",
                    "" if not model.training else "a model handed over in train mode is still in train mode after "
                                                  "greedy_decode: its dropout was active while decoding",
                    location=None if not model.training else ctx.where(_def_line(ctx, "greedy_decode")))]
    return checks


def _sequences(tokens: torch.Tensor, length: int) -> int:
    """How many source sequences a tensor handed to encode() holds. Its axes are told apart by their length (the
    probe's sources are `length` long, fewer in number), so batch-first (B, S) and sequence-first (S, B) count
    alike; a 1-D tensor is one sequence."""
    if tokens.dim() < 2:
        return 1
    other = [n for n in tokens.shape[:2] if n != length]
    return int(other[0]) if other else int(tokens.size(0))


def _def_line(ctx, name):
    from . import locate
    fns = locate.functions(ctx, name)
    return fns[0].lineno if fns else None


def _exact_match(ctx, model, decode, n, min_len, max_len, seed_offset):
    src, tgt = batch(ctx, n, min_len, max_len, seed_offset=seed_offset)
    with torch.no_grad(), ctx.student("greedy_decode(model, src)"):
        ys, _ = decode(model, src, **kwargs_for(decode, max_len=max_len + 3))
    hits = 0
    for i in range(n):
        L = int((src[i] != PAD).sum())
        want = tgt[i, 1:L + 2].tolist()                              # reversed + EOS
        got = ys[i, 1:L + 2].tolist() if ys.size(1) >= L + 2 else []
        hits += got == want
    return hits / n


def brief_training(ctx):
    """Train the student's model with the student's train() briefly, then decode and look at cross-attention."""
    if ctx.quick:
        raise NotRun("--quick: no training probes")
    ctx.need("MiniTransformer", "train")
    # Only the report's pictures depend on this run (no rule does), so it is as short as the picture allows:
    # 300 steps of 24 already show the reference's anti-diagonal (0.45 of the mass against 0.04 on the
    # diagonal; 400 x 32 gives 0.52 for 40% more time).
    steps, bs = value("brief-training", "steps"), value("brief-training", "batch")    # declared in checks.py
    manual_seed(ctx.seed)
    model = ctx.model()
    fn = ctx.module.train
    tr = _trace(ctx, model, steps, bs) if "warmup" not in kwargs_for(fn, warmup=1) else \
        _trace_warm(ctx, model, steps, bs)
    ctx.artifacts["training"] = {"loss": tr["losses"], "lr": [rnd(v, 8) for v in tr["lrs"]],
                                 "grad_norm": [rnd(v, 3) if v is not None else None for v in tr["norms"]],
                                 "seconds": rnd(tr["seconds"], 2), "batch_size": bs}
    losses = [v for v in tr["losses"] if v is not None]
    last = value("brief-training", "last")
    final = sum(losses[-last:]) / max(len(losses[-last:]), 1) if losses else None
    checks = [check("brief-training", "info", rnd(final) if final is not None else None,
                    "falls well below ln 13 = 2.565",
                    f"mean loss of the last {last} of {len(tr['lrs'])} steps of the student's train() (batch {bs})")]
    model.eval()
    if ctx.has("greedy_decode"):
        decode = ctx.module.greedy_decode
        acc = _exact_match(ctx, model, decode, 200, 4, 10, 40)
        ctx.cache["accuracy"] = acc
        # the expectation is the reference's accuracy after the same training: the parent fills it in
        # (harness/reference_curves.fill_expected; the sandbox holds no copy of the reference's measurements)
        checks.append(check("decode-accuracy", "info", rnd(acc, 3), "",
                            "exact-match greedy reversal of 200 fresh sequences of length 4-10"))
    checks += _cross_pattern(ctx, model)
    return checks


def _trace_warm(ctx, model, steps, bs):
    """Brief training compresses warmup to 50 steps (the student's own schedule shape)."""
    fn = ctx.module.train
    real = fn

    def short(m, **kw):
        kw = {k: v for k, v in kw.items() if k in kwargs_for(real, **kw)}
        return real(m, **kw, **kwargs_for(real, warmup=50))
    # the student's own train() with a shorter warmup: named as theirs, so that the guard's check that no
    # contract name is the grader's code (child_integrity.grader_reach) reads the function it wraps
    short.__module__ = getattr(real, "__module__", None)
    ctx.module.train = short
    try:
        return _trace(ctx, model, steps, bs)
    finally:
        ctx.module.train = real


def _cross_maps(ctx, model, src, tgt_in):
    """(logits, one cross-attention tensor per decoder layer) of a forward pass with `tgt_in` fed in."""
    rec = watch(ctx.source.code_path)
    with torch.no_grad(), rec:
        logits, maps = ctx.forward(model, src, tgt_in)
    if isinstance(maps, (list, tuple)) and maps and all(isinstance(m, torch.Tensor) for m in maps):
        return logits, [m.detach() for m in maps]
    L = src.size(1)             # fused kernels return no maps: take the weights whose keys are the source
    return logits, [w for w in attention_weights(rec) if w.size(-1) == L and w.size(-2) == tgt_in.size(1)]


def _own_decode(ctx, model, src, T):
    """The model's own greedy decode of the same source, and its cross-attention (mean over heads, per layer)
    with that decode fed back in: the teacher-forced maps show what the model does given the right previous
    tokens; a model that leaks the future looks perfect there while its own decode is wrong."""
    decode = getattr(ctx.module, "greedy_decode", None)
    if decode is None:
        return None
    try:
        with torch.no_grad(), ctx.student("greedy_decode(model, src)"):
            ys, _ = decode(model, src, **kwargs_for(decode, max_len=T + 1))
        ys_in = ys[:, :T]
        _, cross = _cross_maps(ctx, model, src, ys_in)
    except Exception:          # noqa: BLE001 - the picture is optional; decode's own checks report a failure
        return None
    layers = []
    for w in cross:
        w = w.reshape(-1, *w.shape[-2:]) if w.dim() >= 3 else w[None]
        layers.append([[rnd(v, 3) for v in r] for r in w.float().mean(0).tolist()])
    return {"decoded": ys[0].tolist(), "layers": layers}
def _cross_pattern(ctx, model):
    """Cross-attention on one 6-token source: mass on the anti-diagonal vs the diagonal, per layer and head."""
    src, tgt = batch(ctx, 1, 6, 6, seed_offset=50)
    tgt_in = tgt[:, :-1]                                          # (1, 7)
    logits, cross = _cross_maps(ctx, model, src, tgt_in)
    L = src.size(1)
    if not cross:
        return [check("cross-attn-pattern", "skip", None, "", "no cross-attention weights observed")]
    rows = torch.arange(L)
    out, layers = [], []
    for li, w in enumerate(cross):
        w = w.reshape(-1, *w.shape[-2:]) if w.dim() >= 3 else w[None]    # (heads, T_tgt, T_src)
        anti = w[:, rows, L - 1 - rows].mean(-1)                      # (heads,)
        diag = w[:, rows, rows].mean(-1)
        layers.append({"anti": [rnd(v, 3) for v in anti.tolist()], "diag": [rnd(v, 3) for v in diag.tolist()],
                       "maps": [[[rnd(v, 3) for v in r] for r in h.tolist()] for h in w[:, :L + 1]]})
        out.append((float(anti.mean()), float(diag.mean())))
    best = max(range(len(out)), key=lambda i: out[i][0])
    anti, diag = out[best]
    kind = "not finite" if not math.isfinite(anti + diag) else \
        "anti-diagonal" if anti > 0.3 and anti > 2 * diag else "diagonal" if diag > 0.3 and diag > 2 * anti else \
        "uniform" if max(anti, diag) < 1.5 / L else "mixed"
    ctx.artifacts["cross_attention"] = {"src": src[0].tolist(), "tgt_in": tgt_in[0].tolist(), "layers": layers,
                                        "pred": logits[0].argmax(-1).tolist(), "teacher_forced": True}
    own = _own_decode(ctx, model, src, tgt_in.size(1))
    if own:
        ctx.artifacts["cross_attention"]["own"] = own
    return [check("cross-attn-pattern", "info", {"anti_diagonal": rnd(anti, 3), "diagonal": rnd(diag, 3), "kind": kind},
                  "anti-diagonal",             # the parent adds the reference's mass (reference_curves)
                  f"layer {best + 1}, mean over heads: {num(anti, '.2f')} of the attention on the anti-diagonal, "
                  f"{num(diag, '.2f')} on the diagonal ({kind})")]
