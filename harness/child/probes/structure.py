"""Structural properties the contract implies, whatever the style (issue 29, item 4).

- The layers of a stack are distinct modules that share no parameters: `nn.ModuleList([Layer()] * n)` holds one
  layer n times (half the parameters, and every "layer" learns the same map).
- One attention module is not used for two roles in one pass (a decoder's self- and cross-attention): the
  same weights then serve two different jobs.
- The position-wise feed-forward is not affine: f(a + b) = f(a) + f(b) - f(0) holds for a stack of Linears
  with no nonlinearity between them, which is one linear map however many layers it has.
Each failure carries the line where the list or the module is built. Weight tying (embedding and output
layer) is by design and is not looked at: only siblings of one stack and attention modules are compared.
"""
from __future__ import annotations

import ast

import torch

from ...readable import cut
from .base import Skip, StudentError, check, rnd
from .common import batch, eval_model

AFFINE_TOL = 1e-4     # float32 noise of an affine map ~1e-7; a ReLU/GELU feed-forward at init gives ~0.1-1


def _attr_line(ctx, owner, child) -> int | None:
    """The line of `self.<name> = ...` in the owner's class __init__ where `child` is the attribute's value."""
    names = [n for n, m in owner.named_children() if m is child]
    cls_names = {c.__name__ for c in owner.__class__.__mro__}     # __class__: a module in the model server's too
    try:
        tree = ast.parse(ctx.source.text)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name in cls_names:
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Assign, ast.AnnAssign)):
                    targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                    for t in targets:
                        for e in ast.walk(t):
                            if isinstance(e, ast.Attribute) and e.attr in names and \
                                    isinstance(e.value, ast.Name) and e.value.id == "self":
                                return sub.lineno
    return None


def _line(ctx, model, mod) -> int | None:
    """Where a module was built: its construction site, else the attribute assignment in its owner."""
    # construction sites are recorded for the student's classes only (ids of other modules may be reused)
    line = ctx.built_at(mod) if type(mod).__module__ == getattr(ctx.module, "__name__", None) else None
    if line:
        return line
    for owner in model.modules():
        if any(m is mod for m in owner.children()):
            return _attr_line(ctx, owner, mod)
    return None


def _stack_check(ctx, model) -> dict:
    """Siblings of one ModuleList/Sequential of the same class: distinct objects sharing no parameter."""
    for owner in model.modules():
        if not isinstance(owner, (torch.nn.ModuleList, torch.nn.Sequential)):
            continue
        kids = list(owner)           # iteration keeps repeats; .children() would fold them
        kids = [k for k in kids if len(list(k.parameters())) > 0]
        if len(kids) < 2 or len({type(k) for k in kids}) != 1:
            continue
        seen: dict[int, int] = {}
        for i, k in enumerate(kids):
            if any(k is kids[j] for j in range(i)):
                return _shared(ctx, model, owner, f"entries {[j for j in range(i) if kids[j] is k][0]} and {i} of a "
                                                  f"{type(owner).__name__} of {type(k).__name__} are the same module "
                                                  f"object ([layer] * n repeats one layer)", len(kids))
            for p in k.parameters():
                if id(p) in seen and seen[id(p)] != i:
                    return _shared(ctx, model, owner, f"{type(k).__name__} {seen[id(p)]} and {i} of one stack share "
                                                      f"a parameter of shape {tuple(p.shape)}", len(kids))
                seen[id(p)] = i
    return check("distinct-layers", "pass", 0, "0 shared", "layers of every stack are distinct modules")


def _shared(ctx, model, owner, text, n) -> dict:
    return check("distinct-layers", "fail", 1, "0 shared", text, data={"mechanism": {
        "kind": "shared", "text": text, "layers": n}}, location=ctx.where(_line(ctx, model, owner)))


def _attention_classes(ctx) -> tuple:
    own = getattr(ctx.module, "MultiHeadAttention", None)
    return tuple(c for c in (own, torch.nn.MultiheadAttention) if isinstance(c, type))


def _attention_roles(ctx, model, run) -> dict:
    """Each attention module is called once per forward pass: one called twice serves two roles."""
    classes = _attention_classes(ctx)
    mods = [m for m in model.modules() if classes and isinstance(m, classes)]
    if not mods:
        return check("distinct-attention", "skip", None, "", "no MultiHeadAttention module to look at")
    calls: dict[int, list] = {}

    def hook(m, args, kwargs):
        key = args[1] if len(args) > 1 else kwargs.get("key", kwargs.get("k"))
        calls.setdefault(id(m), []).append(args[0] is key if isinstance(key, torch.Tensor) else None)
    hs = [m.register_forward_pre_hook(hook, with_kwargs=True) for m in mods]
    try:
        run()
    finally:
        for h in hs:
            h.remove()
    for m in mods:
        roles = calls.get(id(m), [])
        if True in roles and False in roles:
            text = (f"one {type(m).__name__} module is called {len(roles)} times in one forward pass, as "
                    f"self-attention (query = key) and as cross-attention (key from another sequence): the "
                    f"same weights serve both")
            return check("distinct-attention", "fail", len(roles), "1 call per attention module", text,
                         data={"mechanism": {"kind": "shared", "text": text}},
                         location=ctx.where(_line(ctx, model, m)))
    return check("distinct-attention", "pass", 1, "1 call per attention module",
                 "each attention module serves one role")


def _affine_check(ctx, model, run) -> dict:
    """Modules called with one (.., d) tensor, holding >= 2 Linears and no attention: not affine."""
    classes = _attention_classes(ctx)
    inputs: dict[int, torch.Tensor] = {}
    cands = [m for m in model.modules() if m is not model
             and sum(isinstance(s, torch.nn.Linear) for s in m.modules()) >= 2
             and not any(isinstance(s, classes) for s in m.modules())]

    def hook(m, args, out):
        if len(args) == 1 and isinstance(args[0], torch.Tensor) and isinstance(out, torch.Tensor) \
                and out.shape == args[0].shape and id(m) not in inputs:
            inputs[id(m)] = args[0].detach()
    if getattr(type(model), "__mtxdiag_remote__", False):     # built in the model server: its record of the same
        got = model.first_inputs(run)
        inputs.update({id(m): got[n] for n, m in model.named_modules() if n in got and any(m is c for c in cands)})
    else:
        hs = [m.register_forward_hook(hook) for m in cands]
        try:
            run()
        finally:
            for h in hs:
                h.remove()
    tested = [m for m in cands if id(m) in inputs]
    if not tested:
        return check("ffn-nonlinear", "skip", None, "", "no feed-forward module (two or more Linears, called with "
                                                          "one tensor of the model's width) ran")
    worst = None
    for m in tested:
        x = inputs[id(m)]
        g = torch.Generator().manual_seed(ctx.seed + 29)
        a = torch.randn(x.shape, generator=g).to(x) * 2
        b = torch.randn(x.shape, generator=g).to(x) * 2
        with torch.no_grad(), ctx.student(f"{type(m).__name__}(x)"):
            fab, fa, fb, f0 = m(a + b), m(a), m(b), m(torch.zeros_like(a))
        err = float((fab - fa - fb + f0).norm() / (fab - f0).norm().clamp_min(1e-12))
        size = sum(1 for _ in m.modules())    # among affine ones, the innermost: the list that lacks the activation
        if worst is None or (err, size) < (worst[0], worst[2]) or (err < AFFINE_TOL and size < worst[2]):
            worst = (err, m, size)
    err, m, _ = worst
    if err < AFFINE_TOL:
        text = (f"{type(m).__name__} is affine: |f(a+b) - f(a) - f(b) + f(0)| / |f(a+b) - f(0)| = {err:.1e}; its "
                f"Linears compose to one linear map (no nonlinearity between them)")
        return check("ffn-nonlinear", "fail", rnd(err, 8), f">= {AFFINE_TOL:g}", text,
                     data={"mechanism": {"kind": "affine", "text": text}}, location=ctx.where(_line(ctx, model, m)))
    return check("ffn-nonlinear", "pass", rnd(err, 6), f">= {AFFINE_TOL:g}",
                 "relative deviation from additivity of the feed-forward (0 for an affine map)")


def structure(ctx):
    """reversal: the model at the contract's defaults."""
    model = eval_model(ctx)
    src, tgt = batch(ctx, 3, 5, 7, seed_offset=29)

    def run():
        with torch.no_grad():
            ctx.forward(model, src, tgt[:, :-1])
    return _all(ctx, model, run)


def block_structure(ctx):
    """block: one TransformerBlock (its feed-forward and attention)."""
    from .block import inputs, make_block, run_block
    block = make_block(ctx, 16, 2, 32)     # lines from the attribute assignments (no construction sites here:
    # they patch nn.Module.__init__, which the guard must find unchanged when a student call ends)
    x = inputs(ctx, 6, 16, offset=29)

    def run():
        with torch.no_grad():
            run_block(ctx, block, x)
    try:
        run()
    except StudentError as e:
        raise Skip(f"the forward pass raises ({cut(e, 200)}): structure is not measured") from None
    try:
        return [_affine_check(ctx, block, run)]
    except StudentError as e:
        return [check("ffn-nonlinear", "skip", None, "", f"could not be measured: {cut(e, 200)}")]


def _all(ctx, model, run) -> list:
    try:
        run()
    except StudentError as e:
        raise Skip(f"the forward pass raises ({cut(e, 200)}): structure is not measured") from None
    out = [_stack_check(ctx, model)]
    for fn in (_attention_roles, _affine_check):
        try:
            out.append(fn(ctx, model, run))
        except StudentError as e:
            out.append(check({_attention_roles: "distinct-attention", _affine_check: "ffn-nonlinear"}[fn], "skip",
                             None, "", f"could not be measured: {cut(e, 200)}"))
    return out
