"""`lm`: parameters the TransformerLM's forward pass uses that model.parameters() does not hold (check
lm-parameters).

An optimizer built as AdamW(model.parameters()) trains what the module registers, and nothing else: blocks kept
in a plain Python list or dict (not nn.ModuleList / nn.ModuleDict), or a tensor kept as a plain attribute, take
part in every forward pass and never change. The course's tests cannot see it (they load weights and compare
one forward pass). Measured on the model the student's adapter builds and calls (model_call.py): the leaves of
autograd's graph of one forward pass that require a gradient, less the module's parameters and the weights the
adapter was given. Located at the statement of the student's class that assigns the attribute holding them.
"""
from __future__ import annotations

import ast
import inspect
import textwrap

import torch

from ....readable import cut
from ... import lm_loader
from ..base import StudentError, check
from .common import classify, gen
from .model_call import Call, capture, the_model
from .train_brief import adapter_args, corpus, init_weights

CHECK = "lm-parameters"
EXPECTED = "every tensor the forward pass trains through is in model.parameters()"
_MODULE_OWN = frozenset(vars(torch.nn.Module()))        # nn.Module's own bookkeeping (_parameters, _modules, ...)


def _leaves(y: torch.Tensor) -> list[torch.Tensor]:
    """The tensors autograd would accumulate a gradient into from y (the leaves of its graph)."""
    out, seen, todo = [], set(), [y.grad_fn]
    while todo and len(seen) < 200_000:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        var = getattr(node, "variable", None)
        if isinstance(var, torch.Tensor):
            out.append(var)
        todo.extend(n for n, _ in node.next_functions)
    return out


def _tensors_in(v, depth: int = 0) -> list[torch.Tensor]:
    """The tensors a plain attribute holds: a module's parameters, a tensor, the items of a container."""
    if isinstance(v, torch.nn.Module):
        return list(v.parameters())
    if isinstance(v, torch.Tensor):
        return [v]
    if depth < 3 and isinstance(v, (list, tuple, set, frozenset)):
        return [t for x in list(v)[:1000] for t in _tensors_in(x, depth + 1)]
    if depth < 3 and isinstance(v, dict):
        return [t for x in list(v.values())[:1000] for t in _tensors_in(x, depth + 1)]
    return []


def holders(model: torch.nn.Module, missing: set) -> list[tuple[torch.nn.Module, str, str]]:
    """(module, attribute, what it is) of the plain attributes of the registered modules that hold a missing
    tensor, the outermost module first."""
    out = []
    for _, m in model.named_modules():
        for attr, v in vars(m).items():
            if attr in _MODULE_OWN:
                continue
            if any(id(t) in missing for t in _tensors_in(v)):
                out.append((m, attr, type(v).__name__))
    return out


def assigned_at(cls: type, attr: str) -> dict | None:
    """The first statement (in __init__ first) of the student's classes in cls's MRO that assigns self.<attr>."""
    files = lm_loader.STATE.files
    for klass in cls.__mro__:
        fns = sorted(vars(klass).items(), key=lambda kv: kv[0] != "__init__")
        for _, f in fns:
            code = getattr(f, "__code__", None)
            if code is None or code.co_filename not in files or not code.co_varnames:
                continue
            try:
                lines, start = inspect.getsourcelines(f)
                tree = ast.parse(textwrap.dedent("".join(lines)))
            except (OSError, TypeError, SyntaxError):
                continue
            me, hits = code.co_varnames[0], []
            for node in ast.walk(tree):
                targets = node.targets if isinstance(node, ast.Assign) else \
                    [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
                flat = [e for t in targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]
                if any(isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name)
                       and t.value.id == me for t in flat):
                    hits.append(node.lineno)
            if hits:
                return {"file": files[code.co_filename], "line": start + min(hits) - 1}
    return None


def _skip(why: str, **data) -> list:
    return [check(CHECK, "skip", None, EXPECTED, f"not measured: {why}", data={"component": "lm", **data})]


def parameters(ctx):
    """The check lm-parameters (see the module's docstring)."""
    fn = getattr(ctx.module, "run_transformer_lm", None)
    if fn is None:
        return _skip("run_transformer_lm is not defined", kind="absent")
    _, vocab = corpus()
    w0 = init_weights(ctx.seed, vocab)
    x0 = torch.randint(0, vocab, (2, 12), generator=gen(ctx.seed, 700))
    try:
        with ctx.student("run_transformer_lm (the model's parameters)", seconds=ctx.budget(30.0)):
            out, calls = capture(fn, adapter_args(vocab, dict(w0), x0))
            model: Call | None = the_model(out, calls, x0)
            if model is None:
                return _skip("no module of yours, called again as the adapter called it, reproduces the adapter's "
                             "output (a model computed from the weights themselves trains those)")
            with torch.enable_grad():
                y = model(x0)
    except StudentError as e:
        if isinstance(e.exc, MemoryError):
            raise
        # the lm component's own check reports the exception
        return _skip(f"run_transformer_lm raised {type(e.exc).__name__}: {cut(e.exc, 200)}",
                     kind="not-implemented" if classify(e.exc) == "not-implemented" else "error")
    if not isinstance(y, torch.Tensor) or y.grad_fn is None:
        return _skip("the model's output carries no gradient")
    registered = {id(p) for p in model.module.parameters()} | {id(w) for w in w0.values()}
    missing = {id(t): t for t in _leaves(y) if t.requires_grad and id(t) not in registered}
    name = type(model.module).__name__
    n_params = sum(p.numel() for p in model.module.parameters())
    if not missing:
        return [check(CHECK, "pass", {"unregistered": 0, "registered_values": n_params}, EXPECTED,
                      f"every tensor {name}'s forward pass trains through is in {name}.parameters()",
                      data={"component": "lm"})]
    values = sum(t.numel() for t in missing.values())
    held = holders(model.module, set(missing))
    where = assigned_at(type(held[0][0]), held[0][1]) if held else None
    places = [f"{type(m).__name__}.{a} (a plain {kind})" for m, a, kind in held[:3]]
    detail = (f"{len(missing)} tensors ({values} values) that {name}'s forward pass uses are not in "
              f"{name}.parameters()" + (f": they are held in {', '.join(places)}, which nn.Module does not "
                                        f"register (nn.ModuleList / nn.ModuleDict / nn.Parameter do)" if places
                                        else "") +
              "; an optimizer built over model.parameters() never trains them")
    return [check(CHECK, "fail", {"unregistered": len(missing), "values": values, "registered_values": n_params},
                  EXPECTED, detail, data={"component": "lm", "kind": "unregistered", "held_in": places},
                  location=where)]
