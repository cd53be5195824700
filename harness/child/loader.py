"""Load a student's file without running its experiments.

Runs in the child process only. A submission's top level is filtered
statement by statement: imports, function and class definitions and constant
assignments run; training calls, prints, plots and `if __name__ == "__main__":`
blocks do not. An assignment that only makes a logging object (`logger =
logging.getLogger(__name__)`) runs too when a definition reads its name at import
(a decorator's argument, a default, a class body). Every skipped statement is reported with its line, so a student
can see exactly what the harness did not execute.

Notebooks (nbformat 4) are flattened into one source whose lines map back to
(cell, line); magics (`%...`) and shell escapes (`!...`) are skipped the same way.
"""
from __future__ import annotations

import ast
import contextlib
import types

from .. import limits
from ..source import Source, SubmissionError, read_source  # noqa: F401  (the parent reads text there, torch-free)

# Calls allowed in a top-level assignment: they compute constants, never train.
SAFE_CALLS = {
    "int", "float", "str", "bool", "tuple", "list", "dict", "set", "frozenset", "range", "len",
    "min", "max", "abs", "round", "sorted", "enumerate", "zip", "dataclass", "namedtuple",
    "math.sqrt", "math.log", "math.exp", "math.pow", "math.ceil", "math.floor",
    "torch.device", "torch.cuda.is_available", "torch.backends.mps.is_available",
    "torch.tensor", "torch.float32", "torch.long", "typing.NamedTuple", "TypeVar",
    "collections.namedtuple", "os.environ.get", "os.getenv",
}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


def _walk_outside_lambdas(node: ast.AST):
    """ast.walk, except that a lambda's body is not entered (it does not run at definition time)."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        if not isinstance(n, ast.Lambda):
            todo.extend(ast.iter_child_nodes(n))


def _safe_call(func: ast.AST) -> bool:
    name = _dotted(func)
    # torch.nn constructors (a loss object, an activation) build small objects and run no experiment
    return name in SAFE_CALLS or name.startswith(("nn.", "torch.nn."))


def _is_constant_expr(node: ast.AST) -> bool:
    """True when evaluating `node` cannot start an experiment (no unsafe calls)."""
    for sub in _walk_outside_lambdas(node):
        if isinstance(sub, ast.Call) and not _safe_call(sub.func):
            return False
        if isinstance(sub, (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
            return False
    return True


def _bound(stmt: ast.stmt) -> set[str]:
    """Names a top-level statement binds."""
    out = set()
    for n in ast.walk(stmt):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is stmt:
            out.add(n.name)
        elif isinstance(n, ast.alias):
            out.add((n.asname or n.name).split(".")[0])
    return out


def _reads(stmt: ast.stmt) -> set[str]:
    """Names a statement reads when it runs (function bodies and lambdas excluded: they run later)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        nodes = stmt.decorator_list + stmt.args.defaults + [d for d in stmt.args.kw_defaults if d]
    elif isinstance(stmt, ast.ClassDef):
        nodes = stmt.bases + stmt.decorator_list  # class bodies: names used there are checked when they run
    else:
        nodes = [stmt]
    return {n.id for root in nodes for n in _walk_outside_lambdas(root)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


# Logging calls that only make or name objects (no handler that writes, no process-wide configuration). An
# assignment of nothing else is kept when a definition reads its name at import: filter_module.
IMPORT_TIME_CALLS = {"logging.getLogger", "logging.Logger", "logging.LoggerAdapter", "logging.Formatter",
                     "logging.NullHandler", "logging.getLevelName"}


def _import_reads(stmt: ast.stmt) -> set[str]:
    """Names a def or class reads while its definition runs: _reads, and for a class its keywords and its
    body's own statements (its methods' bodies excluded, nested classes included)."""
    out = _reads(stmt)
    if isinstance(stmt, ast.ClassDef):
        out |= {n.id for kw in stmt.keywords for n in _walk_outside_lambdas(kw.value)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        for s in stmt.body:
            out |= _import_reads(s) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                else _reads(s)
    return out


def _logging_names(body: list[ast.stmt]) -> dict[str, str]:
    """The module's own spellings of logging's names, from its top-level imports: {"log": "logging"} for
    `import logging as log`, {"getLogger": "logging.getLogger"} for `from logging import getLogger`."""
    out = {}
    for stmt in body:
        if isinstance(stmt, ast.Import):
            out.update({a.asname or a.name: a.name for a in stmt.names if a.name == "logging"})
        elif isinstance(stmt, ast.ImportFrom) and stmt.module == "logging" and not stmt.level:
            out.update({a.asname or a.name: f"logging.{a.name}" for a in stmt.names})
    return out


def _harmless_at_import(stmt: ast.stmt, spelled: dict[str, str]) -> bool:
    """An assignment to plain names whose every call is safe (SAFE_CALLS) or makes a logging object
    (IMPORT_TIME_CALLS), however the module spells logging."""
    if isinstance(stmt, ast.Assign):
        targets, value = stmt.targets, stmt.value
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        targets, value = [stmt.target], stmt.value
    else:
        return False
    if not all(isinstance(t, ast.Name) for t in targets):
        return False
    for sub in _walk_outside_lambdas(value):
        if isinstance(sub, ast.Call):
            head, dot, rest = _dotted(sub.func).partition(".")
            if not (_safe_call(sub.func) or spelled.get(head, head) + dot + rest in IMPORT_TIME_CALLS):
                return False
        if isinstance(sub, (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
            return False
    return True


def _keep(stmt: ast.stmt) -> tuple[bool, str]:
    """Decide whether a top-level statement runs; the reason is shown when it does not."""
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef,
                         ast.ClassDef, ast.Pass)):
        return True, ""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        return True, ""  # docstrings
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        value = stmt.value
        if value is None or _is_constant_expr(value):
            return True, ""
        return False, "assignment that calls code (experiments are not run)"
    if isinstance(stmt, ast.If):
        test = stmt.test
        if (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
                and test.left.id == "__name__"):
            return False, 'if __name__ == "__main__": block'
        if _is_constant_expr(test) and all(_keep(s)[0] for s in stmt.body + stmt.orelse):
            return True, ""
        return False, "top-level if with experiment code"
    if isinstance(stmt, ast.Try):
        inner = stmt.body + stmt.orelse + stmt.finalbody + [s for h in stmt.handlers for s in h.body]
        if all(_keep(s)[0] for s in inner):
            return True, ""
        return False, "top-level try with experiment code"
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return False, f"top-level call to {_dotted(stmt.value.func)}()"
    return False, f"top-level {type(stmt).__name__.lower()} statement"


def filter_module(source: Source) -> ast.Module:
    """Parse and keep only definitions; record the rest in source.skipped."""
    try:
        tree = ast.parse(source.text, filename=source.code_path)
    except SyntaxError as e:
        raise SubmissionError("syntax-error", f"syntax error: {e.msg}", e.lineno,
                              (e.text or "").rstrip())
    kept = []
    lines = source.text.splitlines()
    from_skipped: set[str] = set()   # names only skipped code would have bound
    # `logger = logging.getLogger(__name__)` runs when a decorator, a default or a class body reads `logger`
    # at import (it makes a logger, nothing else); read only inside functions, on_demand.py provides it
    at_import = set().union(*(_import_reads(s) for s in tree.body
                              if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))))
    spelled = _logging_names(tree.body)
    for stmt in tree.body:
        ok, reason = _keep(stmt)
        if not ok and _bound(stmt) & at_import and _harmless_at_import(stmt, spelled):
            ok = True
        if ok:
            needs = _reads(stmt) & from_skipped
            if needs:
                ok, reason = False, f"uses {', '.join(sorted(needs))}, which comes from skipped code"
        if ok:
            kept.append(stmt)
            from_skipped -= _bound(stmt)
            continue
        from_skipped |= _bound(stmt)
        end = getattr(stmt, "end_lineno", stmt.lineno) or stmt.lineno
        code = "\n".join(lines[stmt.lineno - 1:end])
        entry = {"line": stmt.lineno, "end_line": end, "code": code[:2000], "reason": reason}
        if source.cell_map:
            entry["cell"] = source.cell_map.get(stmt.lineno, (None, 0))[0]
        source.skipped.append(entry)
        source.deferred.append((stmt, entry))
    source.skipped.sort(key=lambda s: s["line"])
    tree.body = kept
    return tree


# Loading runs definitions only: seconds at most. A class body or import-time loop that does not end is
# stopped here, long before the whole check's limit (issue 14: 181 s before this limit). Declared in limits.py.
LOAD_TIMEOUT_S = limits.LOAD_TIMEOUT_S


class LoadTimeout(Exception):
    pass


@contextlib.contextmanager
def load_limit(timeout_s: float):
    """Raise LoadTimeout in this (main) thread if the block runs longer than timeout_s (SIGALRM)."""
    import signal

    def on_alarm(signum, frame):
        raise LoadTimeout(f"loading the submission did not finish within {timeout_s:.0f} s (the load limit; "
                          f"loading runs definitions only)")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def load(source: Source, module_name: str = "submission", timeout_s: float = LOAD_TIMEOUT_S,
         compile_with=None) -> types.ModuleType:
    """Execute the kept definitions in a fresh module; errors become SubmissionError. compile_with(tree, path):
    another compiler (reached.Reach.compile: every function first records that it ran)."""
    import sys
    import traceback

    from . import lazy_import
    tree = filter_module(source)
    lazy = lazy_import.rewrite(tree)      # plotting libraries for the skipped experiments: imported when used
    code = compile_with(tree, source.code_path) if compile_with else compile(tree, source.code_path, "exec")
    module = types.ModuleType(module_name)
    module.__file__ = source.code_path
    if lazy:
        module.__dict__[lazy_import.FACTORY] = lazy_import.lazy
    sys.modules[module_name] = module  # lets pickle/deepcopy find the student's classes
    try:
        with load_limit(timeout_s):
            exec(code, module.__dict__)
    except BaseException as e:  # SystemExit included: a submission may call sys.exit()
        line = student_line(e.__traceback__, source.code_path)
        kind = "missing-module" if isinstance(e, ModuleNotFoundError) else "definition-error"
        if isinstance(e, SystemExit):
            kind = "exit-during-load"
        if isinstance(e, LoadTimeout):
            kind = "timeout"
        msg = "".join(traceback.format_exception_only(type(e), e)).strip()
        raise SubmissionError(kind, msg, line)
    finally:
        module.__dict__.pop(lazy_import.FACTORY, None)
    return module


def student_line(tb, path: str) -> int | None:
    """The innermost line of the student's file in a traceback."""
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line
