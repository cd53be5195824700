"""How the model is wired: gradients, residuals, cross-attention inputs, state kept between calls."""
from __future__ import annotations

import ast

import torch

from ...readable import cut
from ...checks import bound
from ..intercept import watch
from . import locate
from .base import Skip, StudentError, check, manual_seed, rnd
from .block import zero_linears
from .base import caller_line as _caller_line
from .common import PAD, VOCAB, batch, eval_model, kwargs_for, ref_loss


def gradient_flow(ctx):
    """Every parameter gets a finite, non-zero gradient from one batch."""
    model = ctx.model()
    model.train()
    src, tgt = batch(ctx, 16, seed_offset=7)
    rec = watch(ctx.source.code_path)
    called = set()                                  # modules that ran during forward (a split run's: by name)
    remote = getattr(type(model), "__mtxdiag_remote__", False)     # built in the model server (issue 45)
    out = {}

    def run():
        with rec:
            out["logits"], _ = ctx.forward(model, src, tgt[:, :-1])
            out["loss"] = ref_loss(out["logits"], tgt[:, 1:])
    if remote:      # which modules ran: the server's records of a pass of their own (their hooks' copies would
        from .roles.remote import records      # be the watch's detach calls at the student's line)
        with torch.no_grad():
            called = {r.get("name") for r in records(model, lambda: ctx.forward(model, src, tgt[:, :-1]), ("module",))}
        run()
    else:
        hooks = [m.register_forward_hook(lambda mod, a, o: called.add(id(mod))) for m in model.modules()]
        try:
            run()
        finally:
            for h in hooks:
                h.remove()
    logits, loss = out["logits"], out["loss"]
    if not loss.requires_grad:
        return [check("gradient-flow", "fail", {"without_grad": "all"}, "every parameter gets a gradient",
                      "the loss does not require grad: the whole forward pass is detached or under no_grad",
                      location=ctx.where(rec.of("detach")[0].line if rec.of("detach") else None))]
    with ctx.student("loss.backward()"):
        loss.backward()
    if float(logits.detach().float().std()) == 0.0:
        # Constant logits at init (a zero-initialised output layer) block every gradient behind it for one
        # step only, legitimately: measure after two optimizer steps instead.
        opt = None if remote else torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
        for _ in range(2):
            if remote:
                model.step(1e-3)            # torch's Adam there, its gradients then cleared
            else:
                opt.step()
                opt.zero_grad()
            logits, _ = ctx.forward(model, src, tgt[:, :-1])
            loss = ref_loss(logits, tgt[:, 1:])
            with ctx.student("loss.backward()"):
                loss.backward()
    dead, total, dead_n, unused = [], 0, 0, []
    owner = {} if remote else {id(p): m for m in model.modules() for p in m.parameters(recurse=False)}
    for n, p in model.named_parameters():
        if not p.requires_grad:
            continue
        total += p.numel()
        if p.grad is None or float(p.grad.abs().sum()) == 0.0:
            # a module that never ran is unused code, not a cut in the gradient's path
            ran = n.rpartition(".")[0] in called if remote else id(owner.get(id(p))) in called
            (unused if not ran and p.grad is None else dead).append(n)
            dead_n += p.numel() if dead and dead[-1] == n else 0
    detach = [c.line for c in rec.of("detach") if c.line]
    if not dead and unused:
        return [check("gradient-flow", "info", {"params_without_grad": 0, "unused": len(unused)},
                      "every parameter gets a non-zero gradient",
                      "parameters of modules that forward() never calls (unused, harmless): " +
                      ", ".join(unused[:6]) + (" ..." if len(unused) > 6 else ""), data={"unused": unused[:40]})]
    ok = not dead
    if not ok and not detach:  # no .detach() seen: look for no_grad / set_grad_enabled(False) in the model's methods
        for fn in (f for name in ("encode", "decode", "forward") for f in locate.functions(ctx, name)):
            hits = [d.lineno for d in fn.decorator_list if any(w in ast.unparse(d) for w in ("no_grad",
                                                                                        "inference_mode"))]
            hits += locate.lines_mentioning(fn, "no_grad", "set_grad_enabled(False)", "inference_mode", ".data")
            if hits:
                detach = hits
                break
    return [check("gradient-flow", "pass" if ok else "fail",
                  {"params_without_grad": len(dead), "numel_without_grad": dead_n, "numel": total},
                  "every parameter gets a non-zero gradient",
                  "all parameters receive gradient" if ok else
                  f"{dead_n:,} of {total:,} parameter values get no gradient: " + ", ".join(dead[:6]) +
                  (" ..." if len(dead) > 6 else ""),
                  data={"dead": dead[:40], "detach_lines": detach[:5]},
                  location=ctx.where(detach[0] if detach and not ok else None))]


def residual(ctx):
    """With every Linear zeroed, a layer with residuals still passes its input through (LayerNorm(x))."""
    checks = []
    x = torch.randn(2, 6, 64, device=ctx.device)
    mem = torch.randn(2, 5, 64, device=ctx.device)
    for name in ("EncoderLayer", "DecoderLayer"):
        if not ctx.has(name):
            continue
        cls = getattr(ctx.module, name)
        manual_seed(ctx.seed)
        with ctx.student(f"{name}(64, 4, 256)"):
            layer = cls(64, 4, 256, **kwargs_for(cls, dropout=0.0)).to(ctx.device).eval()
        zero_linears(layer)             # a layer built in the model server: assigned there
        with torch.no_grad():
            with ctx.student(f"{name}.forward"):
                out = layer(x) if name == "EncoderLayer" else layer(x, mem)
        out = out[0] if isinstance(out, (tuple, list)) else out
        spread = float(out.reshape(-1, out.size(-1)).std(0).mean())   # how much the output varies over positions
        ok = bound("residual-enc").ok(spread)                    # residual-dec declares the same bound
        fns = locate.functions(ctx, f"{name}.forward")
        line = locate.missing_residual_line(fns[0]) if fns and not ok else None
        checks.append(check(f"residual-{name.lower()[:3]}", "pass" if ok else "fail", rnd(spread, 5),
                            f"{bound('residual-enc')} (the input passes through the residual)",
                            f"{name} with all Linear weights zeroed: spread of the output over positions",
                            data={"layer": name}, location=ctx.where(line)))
    if not checks:
        raise Skip("neither EncoderLayer nor DecoderLayer is defined")
    return checks




def _same(a, b) -> bool:
    """The same values (nested tensors from nn.TransformerEncoder's fast path have no shape to compare)."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.is_nested or b.is_nested:
        return False
    return a.shape == b.shape and bool(torch.equal(a.detach(), b.detach()))


def _memory_of(out):
    """The encoder output among what encode() returns: itself, or the first (B, S, d) tensor of a tuple such as
    (memory, src_padding) that minGPT-style and from-scratch encoders hand back together."""
    if isinstance(out, (tuple, list)):
        return next((t for t in out if isinstance(t, torch.Tensor) and t.dim() == 3 and t.is_floating_point()), out)
    return out


def cross_wiring(ctx):
    """Which attention calls get the encoder output, and as what (query, or key and value)."""
    model = eval_model(ctx)
    if not hasattr(model, "encode"):
        raise Skip("MiniTransformer has no encode(); the encoder output cannot be observed")
    src, tgt = batch(ctx, 2, 7, 7, seed_offset=8)
    tgt_in = tgt[:, :7]                                   # same length as the source: swapped arguments still run
    memories = []
    real_encode = model.encode

    def encode(*a, **k):
        out = real_encode(*a, **k)
        memories.append(out)
        return out
    model.encode = encode
    attn_cls = tuple(c for c in (getattr(ctx.module, "MultiHeadAttention", None), torch.nn.MultiheadAttention)
                     if isinstance(c, type))
    calls = []

    def hook(mod, args, kwargs):
        vals = list(args[:3]) + [kwargs.get(n) for n in ("query", "key", "value", "q", "k", "v") if n in kwargs]
        calls.append((vals[:3], _caller_line(ctx)))
    handles = [m.register_forward_pre_hook(hook, with_kwargs=True) for m in model.modules() if isinstance(m, attn_cls)]
    try:
        with torch.no_grad():
            ctx.forward(model, src, tgt_in)
    finally:
        for h in handles:
            h.remove()
        model.encode = real_encode
    if not memories or not calls:
        raise Skip("no attention module calls observed")
    mem = _memory_of(memories[-1])
    kv_mem = sum(1 for c, _ in calls if len(c) >= 2 and _same(c[1], mem))
    q_lines = [line for c, line in calls if c and _same(c[0], mem) and not (len(c) > 1 and _same(c[1], mem))]
    q_mem = len(q_lines)
    n_dec = len(getattr(model, "dec", [])) if hasattr(model, "dec") else None
    # sensitivity of the output to the source (different source, same target input); also measured on the
    # input of the layer that makes the logits: a zero-initialised output layer makes the logits constant at init
    src2 = src.clone()
    src2[:, :] = (src + 3) % 10
    heads = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and m.out_features == VOCAB]
    hidden = []
    hook = heads[-1].register_forward_hook(lambda m, a, o: hidden.append(a[0])) if heads else None
    try:
        with torch.no_grad():
            a, _ = ctx.forward(model, src, tgt_in)
            b, _ = ctx.forward(model, src2, tgt_in)
    finally:
        if hook is not None:
            hook.remove()
    sens = float((a - b).abs().mean())
    if not bound("source-sensitivity").ok(sens) and len(hidden) == 2 and hidden[0].shape == hidden[1].shape:
        sens = max(sens, float((hidden[0] - hidden[1]).abs().mean()))
    line = None
    if not bound("source-sensitivity").ok(sens):
        kv_lines = [ln for c, ln in calls if len(c) >= 2 and _same(c[1], mem) and ln]
        if kv_lines:  # memory reaches cross-attention, but its output is dropped
            fn = locate.enclosing_function(ctx, kv_lines[0])
            line = locate.unused_after(fn, kv_lines[0]) if fn else None
        else:         # no attention call sees memory: the decoder layer's second attention call is the cross one
            per_layer = [ln for c, ln in calls if ln and not (c and _same(c[0], mem))]
            lines = sorted(set(per_layer))
            line = lines[-1] if len(lines) >= 2 else None
    checks = [check("source-sensitivity", "pass" if bound("source-sensitivity").ok(sens) else "fail", rnd(sens, 5),
                    f"{bound('source-sensitivity')} (the output must depend on the source)",
                    "mean change of the logits when every source token changes, same decoder input",
                    location=ctx.where(line))]
    expected = n_dec if n_dec else "every decoder layer"
    ok = q_mem == 0 and kv_mem >= 1 and (n_dec is None or kv_mem >= n_dec)
    checks.append(check("cross-attn-wiring", "pass" if ok else "fail",
                        {"memory_as_key_value": kv_mem, "memory_as_query": q_mem, "decoder_layers": n_dec},
                        f"the encoder output is key and value of {expected} cross-attention call(s), never the query",
                        f"{len(calls)} attention calls observed",
                        location=ctx.where(q_lines[0] if q_lines else None)))
    return checks


def stateless(ctx):
    """The output for a batch must not depend on the batch seen before (masks cached on self go stale)."""
    model = eval_model(ctx)
    twin = ctx.copy(model)
    a_src, a_tgt = batch(ctx, 3, 4, 5, seed_offset=9)
    b_src, b_tgt = batch(ctx, 3, 8, 10, seed_offset=10)
    before = {k: id(v) for k, v in vars(model).items()}
    with torch.no_grad():
        ctx.forward(model, a_src, a_tgt[:, :-1])
        try:
            after_a, _ = ctx.forward(model, b_src, b_tgt[:, :-1], where="a second forward pass with another length")
            raised = None
        except StudentError as e:
            after_a, raised = None, e
        fresh, _ = ctx.forward(twin, b_src, b_tgt[:, :-1])
    new_attrs = sorted(k for k, v in vars(model).items()
                       if not k.startswith("_") and (k not in before or before[k] != id(v)))
    line = next((ctx.assignment_line(k) for k in new_attrs if ctx.assignment_line(k)), None)
    if raised is not None:
        return [check("stateless-forward", "fail", {"error": cut(raised, 300)}, "the same output as a fresh copy",
                      "the model raises on its second call with another length, though a fresh copy accepts it",
                      data={"attrs": new_attrs[:10]}, location=ctx.where(line or raised.line))]
    err = float((after_a - fresh).abs().max())
    # The same shape with another padding pattern, then batch B again: a cache keyed by length alone (on the
    # model or in a global, which a copy would share) makes B's second output differ from its first.
    c_src, c_tgt = b_src.clone(), b_tgt.clone()
    c_src[0, 3:], c_tgt[0, 4:] = PAD, PAD                 # sample 0 much shorter: new padded positions
    with torch.no_grad():
        ctx.forward(model, c_src, c_tgt[:, :-1])
        again, _ = ctx.forward(model, b_src, b_tgt[:, :-1])
    err = max(err, float((again - after_a).abs().max()))
    ok = bound("stateless-forward").ok(err)
    return [check("stateless-forward", "pass" if ok else "fail", rnd(err, 6), str(bound("stateless-forward")),
                  "change of the output for batch B when the model has seen batch A before",
                  data={"attrs": new_attrs[:10]}, location=ctx.where(line if not ok else None))]
