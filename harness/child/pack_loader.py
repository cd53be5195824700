"""Load a pack's submission folder (harness/packs/): the modules its bindings name, from the copied folder.

Runs in the child only. The parent copied the folder in the pack's layout (isolation/pack_copy.py), so a binding's
target "cs231n.transformer_layers:MultiHeadAttention" is imported as the student would import it, through
lm_loader's RepoFinder: every module filtered (a training loop at a module's top level does not run) and tolerant
(an import that fails binds a placeholder that raises only when used). What a binding names and the folder lacks
(its module, or the name in it) is recorded as absent with the reason; a piece whose code is still the
handout's stub is recorded as not implemented. Neither stops the others from being checked.
"""
from __future__ import annotations

import ast
import importlib
import os
import sys
import types

from ..packs.api import Pack
from ..packs.folder import edition_of, read_text
from ..readable import cut
from . import lm_loader
from .loader import LoadTimeout, SubmissionError, filter_module, load_limit, read_source, student_line

KEY = "__mtxdiag_pack__"     # the namespace module's record of what was loaded (probes/packs.py reads it)


def load(path: str, display: str | None, pack: Pack, timeout_s: float) -> tuple:
    """(Source of the pack's first file, a namespace module holding each binding's student object by component)."""
    try:
        with load_limit(timeout_s):
            return _load(path, (display or path).rstrip("/"), pack)
    except LoadTimeout as e:
        raise SubmissionError("timeout", f"LoadTimeout: {e}", student_line(e.__traceback__, None)) from None


def _load(path: str, display: str, pack: Pack) -> tuple:
    root = os.path.realpath(path)
    first = os.path.join(root, pack.files[0])
    if not os.path.isfile(first):
        raise SubmissionError("missing-adapters", f"the folder has no {pack.files[0]} (the {pack.name} "
                              f"assignment's first file)")
    with open(first, "rb") as f:
        raw = f.read()
    source = read_source(f"{display}/{pack.files[0]}", raw)
    source.run_path = first
    filter_module(source)           # a syntax error in the main file is the submission's load failure, with its line
    tops = lm_loader.top_level_names(root)
    finder = lm_loader.RepoFinder(tops, root, display, lm_loader.shadowing(tops))
    for name in finder.shadow:
        sys.modules.pop(name, None)
    lm_loader.STATE.finder = finder
    sys.meta_path.insert(0, finder)
    edition = edition_of(pack, lambda rel: read_text_at(root, rel))
    name = edition.name if edition is not None else None
    module = types.ModuleType("submission")
    module.__file__ = first
    record = {"pack": pack, "edition": name, "objects": {}, "absent": {}, "not_implemented": {}, "texts": {},
              "stub_at": {}}
    for b in pack.bindings_for(name):
        obj, why = resolve(b.target)
        if obj is None:
            record["absent"][b.component] = why
            continue
        record["objects"][b.component] = obj
        setattr(module, b.component.replace(".", "_"), obj)
        stub, line = unimplemented(obj)
        if stub:
            record["not_implemented"][b.component] = stub
            run_path = _function(obj).__code__.co_filename
            record["stub_at"][b.component] = {"file": lm_loader.STATE.files.get(run_path, run_path), "line": line}
    for run_path, shown in lm_loader.STATE.files.items():
        text = read_text_at(run_path, "")
        if text is not None:
            record["texts"][shown] = text
    source.skipped.extend(lm_loader.STATE.skipped)
    setattr(module, KEY, record)
    return source, module


def read_text_at(root: str, rel: str) -> str | None:
    from pathlib import Path
    return read_text(Path(root) / rel if rel else Path(root))


def resolve(target: str) -> tuple[object | None, str]:
    """The object "module:Qual.Name" names in the submission, or None and why (its module cannot be imported, or
    it does not define the name)."""
    mod, _, qual = target.partition(":")
    try:
        obj: object = importlib.import_module(mod)
    except ModuleNotFoundError as e:
        if e.name and (mod == e.name or mod.startswith(e.name + ".")):
            return None, f"absent: the submission has no module {mod}"
        return None, f"absent: {mod} could not be imported: {cut(e, 200)}"
    except Exception as e:          # the module's own definitions failed (StudentModuleError names the line)
        return None, f"absent: {mod} could not be imported: {type(e).__name__}: {cut(e, 300)}"
    for part in qual.split("."):
        try:
            obj = getattr(obj, part)
        except Exception:
            return None, f"absent: {mod} does not define {qual}"
        if isinstance(obj, lm_loader.Placeholder):
            return None, f"absent: {qual} is unavailable ({cut(repr(obj), 200)})"
    return obj, ""


def resolve_in(module: str, qual: str) -> object | None:
    """The pack's reference object `qual` in its (trusted, installed) module `module`; None when it lacks it."""
    obj: object = importlib.import_module(module)
    for part in qual.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _function(obj):
    """The code a piece runs: a class's forward (or __call__), a function or method itself."""
    if isinstance(obj, type):
        obj = obj.__dict__.get("forward") or obj.__dict__.get("__call__")
    return getattr(obj, "__func__", obj)


def unimplemented(obj) -> tuple[str, int]:
    """("not implemented: ...", its def's line) when the piece's code is still a stub (only pass, docstrings,
    `x = None`, `return x` of such a name, or raise NotImplementedError); ("", 0) otherwise or when its code cannot
    be read."""
    fn = _function(obj)
    code = getattr(fn, "__code__", None)
    if code is None:
        return "", 0
    return stub_in(read_text_at(code.co_filename, ""), code.co_firstlineno)


def stub_in(text: str | None, first: int) -> tuple[str, int]:
    """unimplemented() from a file's text and the first line of the piece's def (its decorators included)."""
    try:
        tree = ast.parse(text or "")
    except (SyntaxError, ValueError):
        return "", 0
    node = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and min([n.lineno] + [d.lineno for d in n.decorator_list]) == first), None)
    if node is None:
        return "", 0
    nones: set[str] = set()
    for stmt in node.body:
        if isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            continue
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) and stmt.value.value is None \
                and all(isinstance(t, ast.Name) for t in stmt.targets):
            nones.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
            continue
        if isinstance(stmt, ast.Return) and (stmt.value is None or (isinstance(stmt.value, ast.Constant) and
                                                                   stmt.value.value is None)
                                             or (isinstance(stmt.value, ast.Name) and stmt.value.id in nones)):
            continue
        if isinstance(stmt, ast.Raise) and "NotImplementedError" in ast.unparse(stmt):
            continue
        return "", 0
    return f"not implemented: {node.name} is still the handout's stub (line {node.lineno})", node.lineno
