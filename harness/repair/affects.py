"""Where an edit outside every function body takes effect: the function lines a re-check should count it at.

reached.py records which functions each probe ran, as spans of their bodies. Two common edits lie outside
every body and would re-run the whole suite, although their effect only flows through calls:
- a default or annotation in a function's signature (`def train(model, lr=1e-6)`): evaluated once when the
  file loads, read when the function is called without that argument. It counts as an edit of that function
  when the parameters stay as they were (names, kinds, which have defaults: probes read those to call it).
  (Two probes read a default without a call, through inspect: long-inputs reads MiniTransformer's max_len and
  train-trace train's warmup; each also calls that function, so it re-runs.)
- a top-level constant (`LR = 1e-6`, `CONFIG = {"lr": 1e-3}`): it counts as an edit of every function that
  reads the name, when nothing at the top level (a class body, a default, another constant) reads it too.
Both only when neither the old nor the new text calls anything there (a call could do anything while the file
loads). Anything else keeps its line, which no span holds: the whole suite re-runs, as before.
"""
from __future__ import annotations

import ast

_ACTIVE = (ast.Call, ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom, ast.ListComp, ast.SetComp,
           ast.DictComp, ast.GeneratorExp)
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def effect_lines(source: str, code: str, lines: set[int]) -> set[int]:
    """`lines` (edited lines of `source`), each signature line replaced by its function's first body line and
    each line of a top-level constant by the first body lines of the functions that read it."""
    try:
        old, new = ast.parse(source), ast.parse(code)
    except (SyntaxError, ValueError):
        return lines
    out: set[int] = set()
    for ln in lines:
        out |= _signature(old, new, ln) or _constant(old, new, ln) or {ln}
    return out


def _inert(nodes) -> bool:
    return all(not isinstance(n, _ACTIVE) for x in nodes if x is not None for n in ast.walk(x))


def _signature_parts(f) -> list:
    """What a def evaluates when the file loads, its decorators aside: defaults and annotations."""
    a = f.args
    parts = a.defaults + [d for d in a.kw_defaults if d is not None] + [f.returns]
    return parts + [x.annotation for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x is not None]


def _params(f) -> tuple:
    """A signature's shape: its parameters' names and kinds, which ones have defaults. A probe reads it without
    a call (inspect: which arguments to pass), so an edit that changes it is not one of the function's body."""
    a = f.args
    return ([x.arg for x in a.posonlyargs], [x.arg for x in a.args], [x.arg for x in a.kwonlyargs],
            a.vararg and a.vararg.arg, a.kwarg and a.kwarg.arg, len(a.defaults), [d is None for d in a.kw_defaults])


def _signature(old: ast.Module, new: ast.Module, ln: int) -> set[int]:
    for f in ast.walk(old):
        if isinstance(f, _FUNCS) and f.lineno <= ln < f.body[0].lineno:
            twin = next((g for g in ast.walk(new) if isinstance(g, _FUNCS) and g.lineno == f.lineno
                         and g.name == f.name), None)
            if twin is not None and _params(f) == _params(twin) and _inert(_signature_parts(f)) and \
                    _inert(_signature_parts(twin)):
                return {f.body[0].lineno}
            return set()
    return set()


def _constant(old: ast.Module, new: ast.Module, ln: int) -> set[int]:
    st = next((s for s in old.body if s.lineno <= ln <= (s.end_lineno or s.lineno)), None)
    names = _assigned(st)
    twin = next((s for s in new.body if s.lineno == getattr(st, "lineno", -1)), None)
    if not isinstance(st, (ast.Assign, ast.AnnAssign)) or not isinstance(twin, (ast.Assign, ast.AnnAssign)) or \
            not names or _assigned(twin) != names or not _inert([st.value, twin.value]):
        return set()
    readers: set[int] = set()
    for top in old.body:
        if top is st:
            continue
        if isinstance(top, ast.ClassDef):   # its bases, decorators and own statements run while the file loads
            fns = [x for x in top.body if isinstance(x, _FUNCS)]
            at_load = top.bases + top.keywords + top.decorator_list + [x for x in top.body if x not in fns]
        else:
            fns = [top] if isinstance(top, _FUNCS) else []
            at_load = [] if fns else [top]
        for f in fns:          # a function's decorators and signature run at load too; its body when called (a
            at_load += f.decorator_list + _signature_parts(f)      # body that ran at load: reached.LOAD)
            if _reads(f.body, names):
                readers.add(f.body[0].lineno)
        if _reads(at_load, names):
            return set()
    return readers


def _assigned(st) -> set[str]:
    """The names a plain top-level assignment binds (`A = B = value`, `A: int = value`), else empty."""
    if isinstance(st, ast.Assign) and all(isinstance(t, ast.Name) for t in st.targets):
        return {t.id for t in st.targets}   # type: ignore[attr-defined]
    if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
        return {st.target.id}
    return set()


def _reads(nodes, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for x in nodes if x is not None for n in ast.walk(x))
