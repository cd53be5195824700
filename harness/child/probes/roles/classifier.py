"""The classifier role (a model over images: forward(x) -> (N, classes) logits, an encoder inside): the logits'
shape; examples of a batch stay apart; deterministic in eval; every token of the encoder's output reads every
patch (an encoder: no mask restricts its attention; perturbing the last patch moves token 0's encoding, which a
causal mask would hide); gradients reach every parameter the reference trains; the reference's logits given the
student's weights, the first submodule whose output leaves the reference's locating the line."""
from __future__ import annotations

import ast

import torch
import torch.nn.functional as F

from . import bounds, observe
from .model import call_site, first_divergence
from .support import build, calls, diff, guarded, make, method, randn, run, twin
from ..base import Skip


def sizes(rctx):
    """(N, C, image side, patch side, classes) from the binding's shapes (its init's values as a fallback)."""
    s, i = rctx.binding.shapes, rctx.binding.init
    return (s.get("N", 2), s.get("C", i.get("in_channels", 3)), s.get("image", i.get("img_size", 16)),
            s.get("patch", i.get("patch_size", 4)), s.get("classes", i.get("num_classes", 10)))


def images(rctx, offset=0, n=None):
    n0, c, side, _, _ = sizes(rctx)
    return randn(rctx, n or n0, c, side, side, offset=offset + 1)


def logits(rctx, m, x):
    out = run(rctx, f"{rctx.binding.component}.forward", m, x)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"forward returned {type(out).__name__}, not a tensor of logits")
    return out


def deterministic(rctx, m, x):
    """The forward in eval; a Skip when two passes differ (the eval-determinism check measures that)."""
    out = logits(rctx, m, x)
    if diff(out, logits(rctx, m, x)) != 0.0:
        raise Skip("two passes in eval mode differ (see eval-determinism): a comparison of passes means nothing")
    return out


def forward_line(rctx) -> int | None:
    fwd = method(rctx, "forward")
    return fwd.lineno if fwd is not None else None


@guarded("shape")
def shape(rctx):
    n, _, _, _, k = sizes(rctx)
    m = build(rctx)
    out = logits(rctx, m, images(rctx))
    expected = f"({n}, {k}) logits"
    if tuple(out.shape) == (n, k):
        return [make(rctx, "shape", "pass", list(out.shape), expected)]
    text = f"the logits' shape is {list(out.shape)}"
    fwd = method(rctx, "forward")
    return [make(rctx, "shape", "fail", str(list(out.shape)), expected, text,
                 {"mechanism": {"kind": "shape", "text": text}}, fwd.body[-1].lineno if fwd and fwd.body else None)]


@guarded("batch")
def batch(rctx):
    n = max(sizes(rctx)[0], 2)
    m = build(rctx)
    x = images(rctx, offset=3, n=n)
    base = deterministic(rctx, m, x)
    x2 = x.clone()
    x2[1] += bounds.PERTURB
    d = diff(logits(rctx, m, x2)[0], base[0])
    st = "pass" if d <= bounds.SAME else "fail"
    return [make(rctx, "batch", st, d, f"changing image 1 moves example 0's logits by <= {bounds.SAME}",
                 "" if st == "pass" else "the examples of a batch mix",
                 {"mechanism": {"kind": "batch-mixed"}} if st == "fail" else {},
                 forward_line(rctx) if st == "fail" else None)]


@guarded("eval-determinism")
def eval_determinism(rctx):
    m = build(rctx, dropout=0.5)
    x = images(rctx)
    d = diff(logits(rctx, m, x), logits(rctx, m, x))
    expected = "two passes in eval mode (dropout 0.5) agree exactly"
    if d == 0.0:
        return [make(rctx, "eval-determinism", "pass", 0.0, expected)]
    drops = [o for o in observe.dropouts(m, lambda: logits(rctx, m, x)) if o[0] == "dropout" and o[3]]
    mech = {"kind": "dropout-in-eval", "text": "a dropout call is told it trains while the model is in eval mode"} \
        if drops else {"kind": "random", "text": "two passes in eval mode differ"}
    return [make(rctx, "eval-determinism", "fail", d, expected, mech["text"], {"mechanism": mech},
                 drops[0][1] if drops else None)]


def encoding(outs: list, tokens: int):
    """The encoder's output among the submodules' outputs: the last (batch, tokens, width) one, or (batch, tokens + 1,
    width) where the model adds a class token to the patches."""
    hits = [(name, out) for name, out in outs if out.dim() == 3 and out.shape[1] in (tokens, tokens + 1)]
    return hits[-1] if hits else (None, None)


MASK_CALLS = ("tril", "triu", "masked_fill", "diag", "eye")


def mask_line(rctx) -> int | None:
    """The forward's statement that builds or hands on a mask: a triangle (tril, triu, ...), else a call with a
    keyword naming a mask, else a line reading a name with "mask" in it."""
    fwd = method(rctx, "forward")
    built = calls(fwd, *MASK_CALLS)
    if built:
        return built[0].lineno
    if fwd is None:
        return None
    kw = sorted(n.lineno for n in ast.walk(fwd) if isinstance(n, ast.Call) and
                any(k.arg and "mask" in k.arg for k in n.keywords))
    if kw:
        return kw[0]
    reads = sorted(n.lineno for n in ast.walk(fwd) if isinstance(n, ast.Name) and "mask" in n.id.lower())
    return reads[0] if reads else fwd.lineno


def mask_form(rctx, mask: torch.Tensor, t: int) -> str:
    """What a mask handed to the encoder allows, in the binding's convention: causal, all-allowed or other."""
    if mask.dim() < 2 or tuple(mask.shape[-2:]) != (t, t):
        return "other"
    mk = mask.reshape(-1, t, t)[0]
    blocks = rctx.binding.mask.blocks if rctx.binding.mask else "zero"
    allowed = ~mk.bool() if blocks == "true" else (mk == 0) if blocks == "-inf" else (mk != 0)
    tril = torch.tril(torch.ones(t, t, dtype=torch.bool, device=mk.device))
    forms = {"causal": tril, "upper": tril.T, "all-allowed": torch.ones_like(tril)}
    return next((k for k, f in forms.items() if torch.equal(allowed.bool(), f)), "other")


@guarded("attends-all")
def attends_all(rctx):
    n, c, side, p, _ = sizes(rctx)
    tokens = (side // p) ** 2
    m = build(rctx)
    x = images(rctx, offset=5)
    deterministic(rctx, m, x)
    x2 = x.clone()
    x2[:, :, side - p:, side - p:] += bounds.PERTURB * randn(rctx, n, c, p, p, offset=6)
    name, base = encoding(observe.module_outputs(m, lambda: logits(rctx, m, x)), tokens)
    _, moved_out = encoding(observe.module_outputs(m, lambda: logits(rctx, m, x2)), tokens)
    if base is None or moved_out is None or moved_out.shape != base.shape:
        return [make(rctx, "attends-all", "skip", detail=f"no submodule returns one encoding per patch "
                     f"({tokens} tokens)")]
    moved = (moved_out - base).detach().abs().double().amax(dim=(0, 2)).cpu()
    rows = base.shape[1]        # tokens, or tokens + 1 with a class token (wherever it sits: every row must move)
    unmoved = [i for i in range(tokens - 1 if rows == tokens else rows) if float(moved[i]) <= bounds.MOVED]
    expected = f"changing the last patch moves every token of the encoder's output ({name}" + \
        (", its class token too" if rows > tokens else "") + f") by > {bounds.MOVED}: no mask restricts an " \
        "encoder's attention"
    if not unmoved:
        return [make(rctx, "attends-all", "pass", float(f"{float(moved.min()):.3g}"), expected)]
    handed = [mk for mk in observe.masks(m, lambda: logits(rctx, m, x))]
    forms = [mask_form(rctx, mk, rows) for mk in handed]
    form = next((f for f in forms if f != "all-allowed"), forms[0] if forms else None)
    if form is not None and form != "all-allowed":
        kind = "masked"
        text = f"changing the last patch leaves {len(unmoved)} of {rows - 1} other tokens of {name} unmoved " \
            f"(token {unmoved[0]} first): the encoder is handed a mask ({form}) that hides later patches"
        line = mask_line(rctx)
    else:
        kind = "unreached"
        text = f"changing the last patch leaves {len(unmoved)} of {rows - 1} other tokens of {name} unmoved " \
            f"(token {unmoved[0]} first), and no blocking mask was seen"
        line = forward_line(rctx)
    return [make(rctx, "attends-all", "fail", {"unmoved": unmoved[:16], "tokens": rows}, expected, text,
                 {"mechanism": {"kind": kind, "text": text, "form": form, "module": name}}, line)]


@guarded("gradients")
def gradients(rctx):
    n, _, _, _, k = sizes(rctx)
    m = build(rctx)
    ref = twin(rctx, m)
    if ref is None:
        return [make(rctx, "gradients", "skip", detail="the parameters' names differ from the reference's")]
    x = images(rctx, offset=7)
    y = torch.arange(n, device=x.device) % k
    m.train()
    ref.train()
    torch.manual_seed(rctx.seed)
    s = logits(rctx, m, x)
    run(rctx, "backward", F.cross_entropy(s, y).backward)
    F.cross_entropy(ref(x), y).backward()
    theirs = {key for key, q in ref.named_parameters() if q.grad is not None and float(q.grad.abs().max()) > 0}
    mine = {key for key, q in m.named_parameters() if q.grad is not None and float(q.grad.abs().max()) > 0}
    missing = sorted(theirs - mine)
    st = "pass" if not missing else "fail"
    return [make(rctx, "gradients", st, len(missing), "every parameter the reference trains gets a gradient",
                 "" if st == "pass" else f"no gradient reaches {', '.join(missing[:4])}",
                 {"missing": missing[:16], "mechanism": {"kind": "no-gradient"}} if missing else {},
                 forward_line(rctx) if missing else None)]


@guarded("reference")
def reference(rctx):
    m = build(rctx)
    ref = twin(rctx, m)
    if ref is None:
        return [make(rctx, "reference", "skip", detail="the parameters' names differ from the reference's")]
    x = images(rctx, offset=9)
    d = diff(deterministic(rctx, m, x), ref(x))
    expected = f"the reference's logits given the student's weights (within {bounds.SAME})"
    if d <= bounds.SAME:
        return [make(rctx, "reference", "pass", d, expected)]
    name = first_divergence(m, ref, lambda: logits(rctx, m, x), lambda: ref(x))
    top = name.split(".")[0] if name else None
    line = (call_site(rctx, top) if top else None) or forward_line(rctx)
    text = f"the first module whose output leaves the reference's: {name}" if name else \
        "the logits differ from the reference's after the last module"
    return [make(rctx, "reference", "fail", d, expected, text,
                 {"mechanism": {"kind": "diverges", "module": name, "text": text}}, line)]


PROBES_SPEC = (("shape", shape, "quick"), ("batch", batch, "quick"), ("eval-determinism", eval_determinism, "quick"),
               ("attends-all", attends_all, "quick"), ("gradients", gradients, "quick"),
               ("reference", reference, "quick"))
