"""Which of the student's functions each probe ran (child side; `check --repair` only, Limits.coverage).

A repair's re-check (repair/verify.py) re-runs the cited checks and every probe whose run reached an edited
line; a probe that never entered a function holding one runs the same code on the patched file, so its
checks are carried over instead of measured again.

How: when the file is compiled, each function and method gets one statement before its body,
`<a set>.add(k)` (k numbers the function; the statement takes the line of the body's first statement, so
every line number, docstring and traceback stays the student's). Probes clear the set before they run and
read it after. A trace function (sys.settrace) would see the same, but it is called for every frame of
torch's own Python too and doubled the training probes' time; this costs one set insertion per call of a
student function. Module and class bodies are not functions: an edit there (or in a decorator, a lambda at
the top level, a function of skipped top-level code, which is compiled elsewhere) has no span here and
re-runs the whole suite, except a default in a signature or a top-level constant, which count where they are
read (repair/affects.py); functions called while the file loads are recorded under "(load)", and an edit in
one of those re-runs everything too.

Student code can reach the set and fill or empty it; that only changes its own repair's re-check.
"""
from __future__ import annotations

import ast
import secrets
import types
from contextlib import contextmanager

LOAD = "(load)"
MAX_FUNCTIONS = 5000


class Reach:
    def __init__(self, on: bool):
        self.on = on
        self.spans: dict[int, list[int]] = {}   # function number -> [first body line, last line]
        self.by: dict[str, list[int]] = {}      # probe id -> the function numbers it ran
        self._hit: set = set()

    def compile(self, tree: ast.Module, path: str) -> types.CodeType:
        """The module's code; with coverage on, every function first records that it ran."""
        if not self.on:
            return compile(tree, path, "exec")
        try:
            return self._instrumented(tree, path)
        except Exception:           # noqa: BLE001 - never a reason to fail a load: no record, the whole suite
            self.on, self.spans = False, {}
            return compile(filtered(tree), path, "exec")

    def _instrumented(self, tree: ast.Module, path: str) -> types.CodeType:
        token = "__mtxdiag_reached_" + secrets.token_hex(8)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or len(self.spans) >= MAX_FUNCTIONS:
                continue
            k = len(self.spans)
            self.spans[k] = [node.body[0].lineno, node.end_lineno or node.body[-1].lineno]
            at = 1 if _docstring(node) else 0
            ref = node.body[min(at, len(node.body) - 1)]
            hit = ast.Expr(ast.Call(ast.Attribute(ast.Constant(token), "add", ast.Load()), [ast.Constant(k)], []))
            for n in ast.walk(hit):     # the body's first line: no line number of the student's moves
                for attr, v in (("lineno", ref.lineno), ("end_lineno", ref.lineno), ("col_offset", ref.col_offset),
                                ("end_col_offset", ref.col_offset)):
                    setattr(n, attr, v)
            node.body.insert(at, hit)
        return _swap(compile(tree, path, "exec"), token, self._hit)

    @contextmanager
    def during(self, name: str):
        """Record under `name` the functions called inside the block (nothing when off)."""
        if not self.on:
            yield
            return
        self._hit.clear()
        try:
            yield
        finally:
            self.by[name] = sorted(set(self.by.get(name, [])) | {k for k in self._hit if isinstance(k, int)})

    def record(self) -> dict:
        return {"functions": {str(k): v for k, v in self.spans.items()}, "probes": self.by}

    def merge_from(self, other) -> None:
        """A side process's record of its probes (untrusted JSON: only lists of ints are kept)."""
        if self.on and isinstance(other, dict):
            for k, v in other.items():
                if isinstance(k, str) and isinstance(v, list):
                    self.by[k[:64]] = [x for x in v if _int(x)][:MAX_FUNCTIONS]


def filtered(tree: ast.Module) -> ast.Module:
    """The tree without the statements `_instrumented` added (they are the only ones at a recorded line
    calling `.add` on a string constant)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.body = [st for st in node.body if not _added(st)] or node.body
    return tree


def _added(st) -> bool:
    return isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and isinstance(st.value.func, ast.Attribute) \
        and isinstance(st.value.func.value, ast.Constant) and str(st.value.func.value.value).startswith("__mtxdiag_reached_")


def _docstring(node) -> bool:
    first = node.body[0]
    return isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)


def _swap(code: types.CodeType, token: str, obj) -> types.CodeType:
    """The code with the placeholder constant replaced by the set, in every nested code object."""
    consts = tuple(obj if isinstance(c, str) and c == token else _swap(c, token, obj) if isinstance(c, types.CodeType)
                   else c for c in code.co_consts)
    return code.replace(co_consts=consts)


def _int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


# ---- the parent's side: the child's record, checked ----------------------------------------------------

def clean(cov) -> dict:
    """{"functions": {number: [first, last]}, "probes": {probe id: [numbers]}} or {} (anything else dropped)."""
    if not isinstance(cov, dict) or not isinstance(cov.get("functions"), dict) or not isinstance(cov.get("probes"), dict):
        return {}
    fns = {k: v for k, v in list(cov["functions"].items())[:MAX_FUNCTIONS]
           if isinstance(k, str) and k.isdigit() and isinstance(v, list) and len(v) == 2 and all(map(_int, v))}
    probes = {k[:64]: [x for x in v[:MAX_FUNCTIONS] if _int(x) and str(x) in fns]
              for k, v in list(cov["probes"].items())[:200] if isinstance(k, str) and isinstance(v, list)}
    return {"functions": fns, "probes": probes}


def to_rerun(cov: dict, lines: set[int], probes: set[str]) -> set[str] | None:
    """The probes among `probes` whose run reached a function holding one of `lines` (lines of the original
    file); None when that cannot be told (no record, a line outside every recorded function, a function the
    file ran while loading, a probe with no record): then the whole suite re-runs."""
    fns, by = cov.get("functions") or {}, cov.get("probes") or {}
    if not lines or not fns or any(p not in by for p in probes):
        return None
    holding = {int(k) for k, (a, b) in fns.items() if any(a <= ln <= b for ln in lines)}
    if any(not any(a <= ln <= b for a, b in fns.values()) for ln in lines) or holding & set(by.get(LOAD, [])):
        return None
    return {p for p in probes if holding & set(by[p])}
