"""The model role (a captioning decoder: forward(features, captions) -> scores) and the sampler role.

Model: first-step loss near ln(vocab), no leak from a later caption token to earlier scores through its own mask
(the mask it passes is read and classified), the current token used, the image features used, gradients reaching
every parameter the reference's reach, and the first module whose output leaves the reference's (same weights).
Sampler: shape, integer words, determinism, the reference's words given the same weights."""
from __future__ import annotations

import ast
import math

import numpy as np
import torch
import torch.nn.functional as F

from . import bounds, observe
from .support import (assigned_before, build, calls, diff, guarded, lines_reading, make, method, owner_class, randn,
                      run, run_child, trace, twin)


def vocabulary(v: int) -> dict:
    words = {"<NULL>": 0, "<START>": 1, "<END>": 2}
    words.update({f"w{i}": i for i in range(3, v)})
    return words


def sizes(rctx):
    s = rctx.binding.shapes
    return s.get("N", 3), s.get("T", 6), s.get("D", 16), s.get("V", 11)


def made(rctx, which="student"):
    return build(rctx, which, vocabulary(sizes(rctx)[3]))


def inputs(rctx, offset=0):
    n, t, d, v = sizes(rctx)
    g = torch.Generator().manual_seed(rctx.seed * 31 + offset)
    caps = torch.randint(3, v, (n, t), generator=g).to(rctx.device)
    return randn(rctx, n, d, offset=offset + 1), caps


def scores(rctx, m, features, captions):
    out = run(rctx, f"{rctx.binding.component}.forward", m, features, captions)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"forward returned {type(out).__name__}, not a tensor of scores")
    return out


@guarded("loss-at-init")
def loss_at_init(rctx):
    n, t, d, v = sizes(rctx)
    m = made(rctx)
    f, c = inputs(rctx)
    s = scores(rctx, m, f, c)
    loss = float(F.cross_entropy(s.detach().reshape(-1, s.shape[-1]).float(), c.reshape(-1)))
    expected = f"ln({v}) = {math.log(v):.3f} within {bounds.LOSS_AT_INIT}"
    st = "pass" if abs(loss - math.log(v)) <= bounds.LOSS_AT_INIT else "fail"
    return [make(rctx, "loss-at-init", st, round(loss, 4), expected,
                 "" if st == "pass" else "the first step's loss is far from a uniform guess")]


def masks_passed(m, call) -> list:
    """The masks handed to the model's submodules during `call()` (keyword arguments named *mask*)."""
    return observe.masks(m, call)


def classify(rctx, mask: torch.Tensor | None, t: int) -> str:
    if mask is None:
        return "no-mask"
    if mask.dim() < 2 or tuple(mask.shape[-2:]) != (t, t):
        return "shape"
    mk = mask.reshape(-1, t, t)[0]
    blocks = rctx.binding.mask.blocks if rctx.binding.mask else "zero"
    allowed = ~mk.bool() if blocks == "true" else (mk == 0) if blocks == "-inf" else (mk != 0)
    tril = torch.tril(torch.ones(t, t, dtype=torch.bool, device=mk.device))
    forms = {"causal": tril, "upper": tril.T, "flipped": tril.flip(-1), "diagonal-blocked": torch.tril(tril, -1) > 0,
             "all-allowed": torch.ones_like(tril), "inverted": ~tril}
    return next((k for k, f in forms.items() if torch.equal(allowed.bool(), f)), "other")


WRONG_OPS = {"upper": ("triu", "transpose", "t"), "flipped": ("flip", "fliplr", "flipud", "rot90"),
             "inverted": ("logical_not", "triu")}


def mask_line(rctx, kind: str | None = None) -> int | None:
    fwd = method(rctx, "forward")
    wrong = calls(fwd, *WRONG_OPS.get(kind or "", ()))
    if wrong:
        return wrong[0].lineno
    made_ = calls(fwd, "tril", "triu", "flip", "fliplr", "ones")
    if made_:
        return made_[0].lineno
    reads = [ln for name in ("mask", "tgt_mask") for ln in lines_reading(fwd, name)]
    return min(reads) if reads else (fwd.lineno if fwd else None)


@guarded("causal")
def causal(rctx):
    n, t, d, v = sizes(rctx)
    m = made(rctx)
    f, c = inputs(rctx)
    seen = masks_passed(m, lambda: scores(rctx, m, f, c))
    base = scores(rctx, m, f, c)
    p = t - 2
    c2 = c.clone()
    c2[:, p] = 3 + (c2[:, p] - 3 + 1) % (v - 3)
    moved = (scores(rctx, m, f, c2) - base).detach().abs().amax(dim=(0, 2))
    leak = float(moved[:p].max()) if p else 0.0
    later = float(moved[p + 1])          # a later position sees token p through attention alone: the leak's scale
    kind = classify(rctx, seen[0] if seen else None, t)
    leaks = leak > bounds.LEAK * later and leak > 0
    declared_2d = (rctx.binding.mask.shape if rctx.binding.mask else "TxS") == "TxS"
    if kind == "causal" and leaks and seen and seen[0].dim() > 2 and declared_2d:
        kind = "batched-mask"       # the right triangle with leading axes the course's (T, T) mask does not have
    expected = f"changing token {p} moves no earlier position's scores (< {bounds.LEAK} of how it moves position " \
        f"{p + 1}'s) and the model's mask is the lower triangle"
    if not leaks and kind != "diagonal-blocked" and not torch.isnan(base).any():
        return [make(rctx, "causal", "pass", float(f"{leak:.3g}"), expected)]
    if torch.isnan(base).any():
        text = "the scores hold NaN: the mask leaves a position no key, or fills with +inf"
    elif leaks:
        text = f"earlier positions see token {p}: the mask the model builds is " + \
            {"upper": "upper-triangular (the future, not the past)", "flipped": "the triangle flipped left-right",
             "all-allowed": "all ones", "no-mask": "never passed", "shape": "not (T, T)",
             "causal": "right, and the attention does not apply it",
             "batched-mask": f"the lower triangle with leading axes, {list(seen[0].shape) if seen else []}, where the "
                             "course's mask is (T, T): the attention mis-broadcasts it"}.get(kind, "not the lower triangle")
    else:
        text = "the model's mask blocks each position's own token (the diagonal)" if kind == "diagonal-blocked" \
            else "the model's mask is not the lower triangle"
    mech = {"kind": kind if kind != "causal" else "attention-ignores-mask", "text": text}
    return [make(rctx, "causal", "fail", float(f"{leak:.3g}") if leak == leak else "nan", expected,
                 text, {"mechanism": mech, "leak": leak, "later": later}, mask_line(rctx, kind))]


@guarded("added-once")
def added_once(rctx):
    """Each submodule's input is what the earlier ones returned: a submodule that adds its input (a positional
    encoding: A(x) = x + table) is not added onto that input again (x + A(x) counts x twice)."""
    m = made(rctx)
    f, c = inputs(rctx)
    rows = trace(m, lambda: scores(rctx, m, f, c))
    expected = "no submodule's input is an additive submodule's output plus that submodule's own input again"
    for i, (name_x, in_x, _) in enumerate(rows):
        for name_a, in_a, out_a in rows[:i]:
            if in_x is None or in_a is None or out_a is None or in_a.shape != out_a.shape or \
                    in_x.shape != out_a.shape or not in_a.is_floating_point():
                continue
            if diff(in_x, out_a + in_a) > bounds.SAME or diff(in_x, out_a) <= bounds.SAME:
                continue
            table = run_child(rctx, m, name_a, torch.zeros_like(in_a))
            if diff(out_a, in_a + table) > bounds.SAME:
                continue                    # a residual around a block that does not add its input: legitimate
            text = f"{name_x} is given {name_a}'s output plus {name_a}'s input again: {name_a} already adds its " \
                f"input (output = input + table), so the input is counted twice"
            return [make(rctx, "added-once", "fail", round(diff(in_x, out_a), 4), expected, text,
                         {"mechanism": {"kind": "added-twice", "text": text, "module": name_a, "into": name_x}},
                         assigned_before(rctx, name_x))]
    return [make(rctx, "added-once", "pass", 0.0, expected)]


@guarded("uses-image")
def uses_image(rctx):
    m = made(rctx)
    f, c = inputs(rctx)
    d = diff(scores(rctx, m, f, c), scores(rctx, m, f + 10 * bounds.PERTURB * randn(rctx, *f.shape, offset=9), c))
    st = "pass" if d > bounds.MOVED else "fail"
    fwd = method(rctx, "forward")
    return [make(rctx, "uses-image", st, d, f"other image features move the scores by > {bounds.MOVED}",
                 "" if st == "pass" else "the scores ignore the image features",
                 {"mechanism": {"kind": "image-ignored"}} if st == "fail" else {},
                 None if st == "pass" else (lines_reading(fwd, "features") or [None])[0])]


@guarded("gradients")
def gradients(rctx):
    m = made(rctx)
    ref = twin(rctx, m, vocabulary(sizes(rctx)[3]))
    if ref is None:
        return [make(rctx, "gradients", "skip", detail="the parameters' names differ from the reference's")]
    f, c = inputs(rctx)
    m.train()
    ref.train()
    torch.manual_seed(rctx.seed)
    s = scores(rctx, m, f, c)
    run(rctx, "backward", F.cross_entropy(s.reshape(-1, s.shape[-1]), c.reshape(-1)).backward)
    r = ref(f, c)
    F.cross_entropy(r.reshape(-1, r.shape[-1]), c.reshape(-1)).backward()
    theirs = {k for k, p in ref.named_parameters() if p.grad is not None and float(p.grad.abs().max()) > 0}
    mine = {k for k, p in m.named_parameters() if p.grad is not None and float(p.grad.abs().max()) > 0}
    missing = sorted(theirs - mine)
    st = "pass" if not missing else "fail"
    return [make(rctx, "gradients", st, len(missing), "every parameter the reference trains gets a gradient",
                 "" if st == "pass" else f"no gradient reaches {', '.join(missing[:4])}",
                 {"missing": missing[:16], "mechanism": {"kind": "no-gradient"}} if missing else {})]


def first_divergence(m, ref, call_m, call_ref) -> str | None:
    """The name of the first submodule (in call order) whose output differs from the reference's."""
    mine = observe.module_outputs(m, call_m)
    theirs = dict(observe.module_outputs(ref, call_ref))
    for name, out in mine:
        if name in theirs and diff(out, theirs[name]) > bounds.SAME:
            return name
    return None


def call_site(rctx, attr: str) -> int | None:
    """The student's forward line that feeds self.<attr>, else the last assignment of what it is given."""
    fwd = method(rctx, "forward")
    hits = [c for c in calls(fwd, attr) if ast.unparse(c.func).startswith("self.")]
    if not hits:
        return None
    call = hits[0]
    arg = call.args[0] if call.args else None
    if isinstance(arg, ast.Name):
        assigns = [n.lineno for n in ast.walk(fwd) if isinstance(n, (ast.Assign, ast.AugAssign)) and
                   n.lineno < call.lineno and any(isinstance(x, ast.Name) and x.id == arg.id for x in
                                                   ast.walk(n.targets[0] if isinstance(n, ast.Assign) else n.target))]
        if assigns:
            return max(assigns)
    return call.lineno


@guarded("reference")
def reference(rctx):
    m = made(rctx)
    ref = twin(rctx, m, vocabulary(sizes(rctx)[3]))
    if ref is None:
        return [make(rctx, "reference", "skip", detail="the parameters' names differ from the reference's")]
    f, c = inputs(rctx)
    d = diff(scores(rctx, m, f, c), ref(f, c))
    expected = f"the reference's scores given the student's weights (within {bounds.SAME})"
    if d <= bounds.SAME:
        return [make(rctx, "reference", "pass", d, expected)]
    name = first_divergence(m, ref, lambda: scores(rctx, m, f, c), lambda: ref(f, c))
    top = name.split(".")[0] if name else None
    line = call_site(rctx, top) if top else None
    text = f"the first module whose output leaves the reference's: {name}" if name else \
        "the scores differ from the reference's after the last module"
    return [make(rctx, "reference", "fail", d, expected, text,
                 {"mechanism": {"kind": "diverges", "module": name, "text": text}}, line)]


# -- the sampler ----------------------------------------------------------------------------------------------
@guarded("sample")
def sample(rctx):
    n, t, d, v = sizes(rctx)
    m = made(rctx)
    cls = owner_class(rctx.student)
    name = rctx.binding.target.rsplit(".", 1)[-1] if cls is not rctx.student else "sample"
    f = randn(rctx, n, d, offset=1).cpu().numpy()
    length = 7
    one = run(rctx, f"{rctx.binding.component}.{name}", getattr(m, name), f, max_length=length)
    two = run(rctx, f"{rctx.binding.component}.{name}", getattr(m, name), f, max_length=length)
    one, two = np.asarray(torch.as_tensor(one).cpu()), np.asarray(torch.as_tensor(two).cpu())
    expected = f"integer words of shape ({n}, {length}), the same twice, the reference's given the same weights"
    problems = []
    if one.shape != (n, length):
        problems.append(f"shape {list(one.shape)}")
    if not np.issubdtype(one.dtype, np.integer):
        problems.append(f"dtype {one.dtype}")
    if one.shape == two.shape and not np.array_equal(one, two):
        problems.append("two calls differ")
    ref = twin(rctx, m, vocabulary(v))
    if not problems and ref is not None:
        theirs = np.asarray(getattr(ref, name)(f, max_length=length))
        if theirs.shape == one.shape and not np.array_equal(theirs, one):
            problems.append("words differ from the reference's")
    st = "pass" if not problems else "fail"
    fn = method(rctx, name)
    return [make(rctx, "sample", st, "; ".join(problems) or "ok", expected, "; ".join(problems),
                 {"mechanism": {"kind": "sample"}} if problems else {}, fn.lineno if fn and problems else None)]


PROBES_SPEC = (("loss-at-init", loss_at_init, "quick"), ("causal", causal, "quick"),
               ("uses-image", uses_image, "quick"), ("added-once", added_once, "quick"),
               ("gradients", gradients, "quick"),
               ("reference", reference, "quick"))
SAMPLER_SPEC = (("sample", sample, "quick"),)
