"""Would the course's own checks have seen it? A bound piece replayed the way the course's checks call it.

A binding's `course` (harness/packs/api.py CourseCall) says how each of the course's own checks calls the piece:
its sizes and constructor arguments, which inputs it hands the one same tensor (self-attention), its mask, its mode
and its weights. Each call is made on the student's piece and on the reference given the student's parameters (built
through support.build and run through support.run, as every role probe), with the same inputs and, in train mode, the same seed before
each pass (the reference keeps its own buffers: a positional table is what the piece computes); the course's check
compares with a relative error, and so does this: max |a - b| / max(1e-8, |a| + |b|)
against the call's `rtol`. The piece's check `<component>.course` (status info: a measurement, never a problem by
itself) holds `data.course_calls` = {"visible", "calls": [{"name", "passed", "rel_error" | "problem"}]}; `visible`
is true when one call fails (raises, returns another shape, NaN, or differs beyond the bar). A binding declared
with NO_COURSE_CHECK (the course runs none) gets the same check with no calls and `"unchecked": true`, made without
calling the piece. The inputs by role: attention its query, key and value (and mask); positional, feed-forward and
layer a (N, T, width) tensor (a layer also its memory and mask); patch-embedding and classifier images (N, C, side,
side); model image features and captions. The parent
(harness/packs/course.py) marks a diagnosis on a piece whose every course call passes as course-invisible.
"""
from __future__ import annotations

import dataclasses
import functools

import torch

from ..base import Skip, manual_seed
from .attention import encode
from .model import vocabulary
from .support import DEFAULT, StudentFailure, assign, build, make, owner_class, run
from .support import randn as _randn

PID = "course"
NONE_RUN = "the course runs no check of this piece (the pack declares NO_COURSE_CHECK)"


def rel_error(a, b) -> float:
    a, b = torch.as_tensor(a).detach().double(), torch.as_tensor(b).detach().double()
    if a.shape != b.shape:
        return float("inf")
    if a.numel() == 0:
        return 0.0
    err = float(((a - b).abs() / (a.abs() + b.abs()).clamp_min(1e-8)).max())
    return err if err == err else float("inf")      # NaN on either side: the course's check fails too


def _linspace(module, span, dtype) -> None:
    """Every parameter one evenly spaced range over its entries, in `dtype` (as a course that sets each parameter's
    data does: its buffers keep theirs)."""
    lo, hi = span
    assign(module, {k: torch.linspace(lo, hi, p.numel(), dtype=dtype).reshape(p.shape).to(p.device)
                    for k, p in module.named_parameters()})


def _given(rctx, student, pre, init, dtype):
    """The reference given the student's parameters (names and shapes must agree), its own buffers kept: a buffer
    such as a positional table is what the piece computes, and the course compares with its own. None when the
    parameters do not agree."""
    ref = build(rctx, "reference", *pre, **init)
    mine, theirs = dict(student.named_parameters()), dict(ref.named_parameters())
    if set(mine) != set(theirs) or any(mine[k].shape != theirs[k].shape for k in mine):
        return None
    for k, p in theirs.items():
        p.data = mine[k].detach().clone().to(dtype)
    return ref


def _pre(rctx, shapes) -> tuple:
    """The constructor's positional arguments a role needs before its keywords (a captioning model's words)."""
    return (vocabulary(shapes.get("V", 11)),) if rctx.binding.role == "model" else ()


def _mask(rctx, call, lengths: tuple):
    """The call's (query, key) mask in the binding's convention: the lower triangle, or about half of the pairs
    blocked at random (every query attends somewhere)."""
    allowed = torch.tril(torch.ones(*lengths, dtype=torch.bool)) if call.mask == "causal" else \
        torch.rand(*lengths, generator=torch.Generator().manual_seed(rctx.seed + 923)) < 0.5
    allowed[:, 0] = True
    mk = rctx.binding.mask
    return encode(rctx, allowed, "float" if mk is not None and (mk.blocks == "-inf" or mk.dtype == "float") else "bool")


def _inputs(rctx, call, shapes) -> list:
    """The forward's arguments in the binding's `call` order, as the course's check makes them (floats in its
    dtype)."""
    role, dt = rctx.binding.role, getattr(torch, call.dtype)
    randn = functools.partial(_randn, dtype=dt)
    made: dict = {}
    if role == "attention":
        n, s, t, e = shapes.get("N", 1), shapes.get("S", 3), shapes.get("T", 3), shapes.get("E", 8)
        own = {"query": randn(rctx, n, s, e, offset=901), "key": randn(rctx, n, t, e, offset=902),
               "value": randn(rctx, n, t, e, offset=903)}
        shared = own["query"] if "query" in call.same else own["key"]
        made = {r: shared if r in call.same else own[r] for r in own}
        if call.mask:
            made["mask"] = _mask(rctx, call, (s, made["key"].shape[1]))
    elif role in ("positional", "feed-forward", "layer"):        # a plain (N, T, width) tensor; a layer's memory
        n, t = shapes.get("N", 1), shapes.get("T", shapes.get("S", 3))
        e = shapes.get("E", shapes.get("D", 8))
        made["x"] = randn(rctx, n, t, e, offset=931)
        if role == "layer":
            made["memory"] = randn(rctx, n, shapes.get("S", t), e, offset=932)
            if call.mask:
                made["mask"] = _mask(rctx, call, (t, t))
    elif role in ("patch-embedding", "classifier"):                 # images (N, C, side, side)
        side = shapes.get("image", 16)
        made["x"] = randn(rctx, shapes.get("N", 2), shapes.get("C", 3), side, side, offset=951)
    elif role == "model":
        n, t, d, v = shapes.get("N", 3), shapes.get("T", 6), shapes.get("D", 16), shapes.get("V", 11)
        made["features"] = randn(rctx, n, d, offset=941)
        made["captions"] = torch.randint(3, v, (n, t), generator=torch.Generator().manual_seed(rctx.seed + 943))
    else:
        raise Skip(f"the course's calls of a {role!r} piece are not replayed yet")
    args = [made.get(r) for r in rctx.binding.call]
    while args and args[-1] is None:
        args.pop()
    return args


def _one(rctx, call) -> dict:
    rctx = dataclasses.replace(rctx, seed=call.seed)        # the course's check is one fixed draw
    shapes = {**dict(rctx.binding.shapes), **dict(call.shapes)}
    init = {k: (DEFAULT if v is None else v) for k, v in dict(call.init).items()}
    pre = _pre(rctx, shapes)
    dtype = getattr(torch, call.dtype)
    student = build(rctx, "student", *pre, **init)
    if call.weights == "linspace":          # the same values whatever the parameters are named
        ref = build(rctx, "reference", *pre, **init)
        for m in (student, ref):
            _linspace(m, call.span, dtype)
    else:
        assign(student, {k: p.data.to(dtype) for k, p in student.named_parameters()})
        ref = _given(rctx, student, pre, init, dtype)
    if ref is None:
        raise Skip("the piece's parameters are not named as the reference's: its weights cannot be given to it")
    for m in (student, ref):
        m.train(call.mode == "train")
    args = _inputs(rctx, call, shapes)
    seed = rctx.seed * 7907 + 577
    manual_seed(seed)
    try:
        with torch.no_grad():
            expected = ref(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    except Exception as e:      # noqa: BLE001 (a call the pack declares that its own reference refuses)
        raise Skip(f"the reference refuses the call {call.name!r}: {type(e).__name__}: {e}"[:300]) from e
    manual_seed(seed)
    try:
        with torch.no_grad():
            got = run(rctx, f"{rctx.binding.component}.forward", student, *args)
    except StudentFailure as f:
        return {"name": call.name, "passed": False, "problem": f"raises {f}"[:200]}
    if not isinstance(got, torch.Tensor):
        return {"name": call.name, "passed": False, "problem": f"returns a {type(got).__name__}, not a tensor"}
    err = rel_error(got, expected)
    out = {"name": call.name, "passed": err <= call.rtol, "rel_error": err if err != float("inf") else None,
           "bar": call.rtol}
    if err == float("inf"):
        out["problem"] = "another shape or NaN" if tuple(got.shape) != tuple(expected.shape) else "NaN"
    return out


def replay(rctx) -> list[dict]:
    """The `<component>.course` check of a binding that declares its course calls (info; skip when unmeasured)."""
    calls = getattr(rctx.binding, "course", None)
    if calls is None:
        return []
    if not calls:           # NO_COURSE_CHECK: declared, the course runs no check of this piece
        return [make(rctx, PID, "info", {"visible": False, "calls": 0}, "how the course's own checks would judge it",
                     NONE_RUN, {"course_calls": {"visible": False, "calls": [], "unchecked": True}})]
    if owner_class(rctx.student) is None or not isinstance(rctx.student, type):
        return [make(rctx, PID, "skip", detail="the course's calls are replayed on a class only")]
    done, why = [], ""
    for call in calls:
        try:
            done.append(_one(rctx, call))
        except Skip as s:
            why = str(s)
        except StudentFailure as f:
            done.append({"name": call.name, "passed": False, "problem": f"cannot be built: {f}"[:200]})
    if not done:
        return [make(rctx, PID, "skip", detail=f"the course's calls could not be replayed: {why}",
                     data={"could_not_measure": why})]
    visible = not all(c["passed"] for c in done)
    worst = max((c.get("rel_error") or 0.0 for c in done), default=0.0)
    expected = "how the course's own checks would judge it (relative error within each call's bar)"
    failed = [f"{c['name']}: " + (c.get("problem") or f"relative error {c['rel_error']:.2g}") for c in done
              if not c["passed"]]
    detail = ("the course's own checks would fail: " + "; ".join(failed)) if visible else \
        f"the course's own checks would pass ({len(done)} calls, worst relative error {worst:.2g})"
    return [make(rctx, PID, "info", {"visible": visible, "calls": len(done)}, expected, detail,
                 {"course_calls": {"visible": visible, "calls": done}})]
