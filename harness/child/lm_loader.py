"""Load a CS336-style `lm` submission: a repository (tests/adapters.py + the package it imports) or one file.

Runs in the child process only. Every module of the student's repository is
served by an import hook (RepoFinder) that applies loader.filter_module to it,
so a training loop at a module's top level does not run. Imports are tolerant:
an import that fails binds a placeholder for each name it should have bound,
and the placeholder raises ModuleNotFoundError only when it is used. A
tokenizer module that needs a package which is not installed therefore blocks
only the adapters that call it, and the probes report that per component.
"""
from __future__ import annotations

import __future__
import ast
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types

from ..readable import cut
from . import lm_paths
from ..assignments import AUTO, LM, assignment_of
from ..identity import GRADER_PREFIXES
from .loader import (LOAD_TIMEOUT_S, LoadTimeout, Source, SubmissionError, filter_module, load_limit,
                     read_source, student_line)
from ..source import SKIP_DIRS  # folders never copied or imported (source.py; the parent copies by them too)

# The contract, in the assignment's build order (the report's checklist follows it): harness/assignments.py
ADAPTERS = LM.required
OUT_OF_SCOPE = ("get_tokenizer", "run_train_bpe", "run_save_checkpoint", "run_load_checkpoint")
# Never served from a student's repository: the grader's own packages (identity.py) and what its probes import.
PROTECTED = set(GRADER_PREFIXES) | {"torch", "numpy", "einops", "jaxtyping", "regex", "tqdm", "typing_extensions",
                                    "click", "pytest"}
# Standard-library modules the grader and torch use after the student's code loaded: a student's folder of
# that name is never served in their place (a student `code/` or `model/` package is).
GRADER_STDLIB = {"abc", "ast", "builtins", "collections", "concurrent", "contextlib", "copy", "ctypes",
                 "dataclasses", "encodings", "enum", "functools", "gc", "importlib", "inspect", "io", "itertools",
                 "json", "logging", "math", "multiprocessing", "numbers", "operator", "os", "pathlib", "pickle",
                 "random", "re", "select", "signal", "site", "socket", "string", "struct", "sys", "tempfile",
                 "threading", "time", "traceback", "types", "typing", "unittest", "warnings", "weakref", "test",
                 "email", "http", "urllib", "xml", "sqlite3", "asyncio", "distutils", "tkinter", "curses",
                 "dbm", "venv", "wsgiref", "xmlrpc", "lib2to3", "pydoc_data", "idlelib", "ensurepip", "zoneinfo"}



class _State:
    """What the loader learned, for the probes: import failures, where every student file came from.

    An instance, not module-level containers: the tamper guard watches the grader's module-level dicts and
    lists, and these legitimately grow while student modules load (also lazily, during the probes)."""

    def __init__(self):
        self.notes: list[dict] = []
        self.files: dict[str, str] = {}     # path that runs -> path shown to the user
        self.skipped: list[dict] = []
        self.finder = None                   # the repository's RepoFinder, once one is installed
        self.path_additions: list[dict] = []   # sys.path entries into the repository that were honoured
        self.environment: list[dict] = []      # imports a newer Python has (typing.override on 3.11)


STATE = _State()


def wants(raw: bytes | None, assignment: str) -> bool:
    """Whether a single file should load as an `lm` submission (it defines the adapters)."""
    if assignment_of(assignment).is_repository:
        return True
    if assignment != AUTO or raw is None:
        return raw is None
    return b"def run_linear" in raw or b"def run_transformer_lm" in raw or b"def run_rope" in raw


class MissingDependency(ModuleNotFoundError):
    """A name whose import failed was used: raised by a Placeholder at its first real use."""


class Placeholder:
    """Stands for a name whose import failed; harmless in annotations, raises when called or used."""

    def __init__(self, name: str, reason: str, missing: str | None):
        object.__setattr__(self, "_mtx", (name, reason, missing))

    def _fail(self, *a, **k):
        name, reason, missing = object.__getattribute__(self, "_mtx")
        raise MissingDependency(f"{name} is unavailable: {reason}", name=missing)

    __call__ = _fail
    __iter__ = _fail
    __len__ = _fail
    __bool__ = lambda self: True   # noqa: E731  (`if HAVE_X:` style guards see a value)

    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        name, reason, missing = object.__getattribute__(self, "_mtx")
        return Placeholder(f"{name}.{attr}", reason, missing)

    def __getitem__(self, item):        # jaxtyping-style annotations: Float[Tensor, "..."]
        return self

    def __or__(self, other):
        return self

    __ror__ = __or__

    def __mro_entries__(self, bases):   # `class Tok(MissingBase)` defines a class that fails when built
        ph = self

        class Unavailable:
            def __init__(self, *a, **k):
                ph._fail()
        return (Unavailable,)

    def __repr__(self):
        return f"<unavailable {object.__getattribute__(self, '_mtx')[0]}>"


def _future_flags(tree: ast.Module) -> int:
    flags = 0
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
            for a in stmt.names:
                feature = getattr(__future__, a.name, None)
                flags |= getattr(feature, "compiler_flag", 0)
    return flags


def _reason(e: BaseException) -> tuple[str, str | None]:
    missing = getattr(e, "name", None) if isinstance(e, ModuleNotFoundError) else None
    return f"{type(e).__name__}: {cut(e, 300)}", missing


def _bind_failed_import(stmt, ns: dict, e: BaseException, code_path: str, flags: int, display: str):
    """An import statement failed: retry name by name; bind a placeholder for each name that fails."""
    reason, missing = _reason(e)
    bound = []
    if isinstance(stmt, ast.Import):
        for a in stmt.names:
            local = a.asname or a.name.split(".")[0]
            try:
                exec(compile(ast.Module([ast.Import([a], lineno=stmt.lineno, col_offset=0)], []), code_path,
                             "exec", flags=flags, dont_inherit=True), ns)
            except ImportError as e2:
                r2, m2 = _reason(e2)
                ns[local] = Placeholder(local, r2, m2)
                bound.append(local)
                reason, missing = r2, m2 or missing
    else:
        for a in stmt.names:
            if a.name == "*":
                continue
            local = a.asname or a.name
            one = ast.ImportFrom(stmt.module, [a], stmt.level, lineno=stmt.lineno, col_offset=0)
            try:
                exec(compile(ast.Module([one], []), code_path, "exec", flags=flags, dont_inherit=True), ns)
            except ImportError as e2:
                if _newer_python(stmt, a, ns, display):
                    continue
                r2, m2 = _reason(e2)
                ns[local] = Placeholder(local, r2, m2)
                bound.append(local)
                reason, missing = r2, m2 or missing
    if bound:       # every name was found after all (a newer Python's, bound from typing_extensions)
        STATE.notes.append({"file": display, "line": stmt.lineno, "names": bound, "error": reason,
                            "missing_module": missing})


def _newer_python(stmt, alias, ns: dict, display: str) -> bool:
    """`from typing import override` on a Python whose typing lacks it (3.12 added it): the grader's
    environment, not the student's code. typing_extensions has the same name: bind it, and say so."""
    if stmt.level or stmt.module != "typing":
        return False
    try:
        import typing_extensions
        value = getattr(typing_extensions, alias.name)
    except (ImportError, AttributeError):
        return False
    ns[alias.asname or alias.name] = value
    STATE.environment.append({"file": display, "line": stmt.lineno, "name": f"typing.{alias.name}",
                              "note": f"typing.{alias.name} needs a newer Python than the grader's "
                                      f"{sys.version_info[0]}.{sys.version_info[1]}; typing_extensions' "
                                      "was used instead"})
    return True


def exec_definitions(tree: ast.Module, code_path: str, ns: dict, display: str):
    """Run the kept statements one at a time; a failing import binds placeholders, anything else raises."""
    flags = _future_flags(tree)
    for stmt in tree.body:
        code = compile(ast.Module([stmt], []), code_path, "exec", flags=flags, dont_inherit=True)
        try:
            exec(code, ns)
        except ImportError as e:
            if not isinstance(stmt, (ast.Import, ast.ImportFrom)):
                raise
            _bind_failed_import(stmt, ns, e, code_path, flags, display)


class StudentModuleError(ImportError):
    """A module of the student's package failed while its definitions ran (its importer binds placeholders)."""


class StudentLoader(importlib.abc.Loader):
    def __init__(self, path: str | None, display: str | None):
        self.path, self.display = path, display

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        if self.path is None:          # a namespace package (a folder without __init__.py)
            return
        with open(self.path, "rb") as f:
            raw = f.read()
        try:
            source = read_source(self.display, raw)
            source.run_path = self.path
            tree = filter_module(source)
        except SubmissionError as e:
            raise StudentModuleError(f"{self.display} line {e.line}: {e.message}") from None
        STATE.skipped.extend(dict(s, file=self.display) for s in source.skipped)
        honour_path_additions(source.text, self.path)
        try:
            exec_definitions(tree, self.path, module.__dict__, self.display)
        except BaseException as e:
            if isinstance(e, (KeyboardInterrupt, LoadTimeout)):   # not an import failure to work around
                raise
            line = student_line(e.__traceback__, self.path)
            raise StudentModuleError(f"{self.display} line {line}: {type(e).__name__}: {cut(e, 300)}") from None


class RepoFinder(importlib.abc.MetaPathFinder):
    """Serves the student's top-level packages and modules from their repository, through StudentLoader."""

    def __init__(self, tops: dict[str, str], root: str, display: str, shadow: frozenset = frozenset()):
        self.tops, self.root, self.display, self.shadow = tops, root, display, shadow

    def _show(self, path: str) -> str:
        rel = os.path.relpath(path, self.root)
        shown = f"{self.display}/{rel}" if self.display else rel
        STATE.files[path] = shown
        return shown

    def find_spec(self, fullname, path=None, target=None):
        top = fullname.partition(".")[0]
        if top not in self.tops:
            return None
        if top in self.shadow and not self._student_importing():
            return None        # the grader's own `import code` still gets the standard library's
        base = os.path.join(self.tops[top], *fullname.split("."))
        if os.path.isdir(base):
            init = os.path.join(base, "__init__.py")
            if os.path.isfile(init):
                return importlib.util.spec_from_file_location(
                    fullname, init, loader=StudentLoader(init, self._show(init)), submodule_search_locations=[base])
            spec = importlib.machinery.ModuleSpec(fullname, StudentLoader(None, None), is_package=True)
            spec.submodule_search_locations = [base]
            return spec
        if os.path.isfile(base + ".py"):
            f = base + ".py"
            return importlib.util.spec_from_file_location(fullname, f, loader=StudentLoader(f, self._show(f)))
        return None


    def _student_importing(self) -> bool:
        """Whether the import statement being served runs in one of the student's files."""
        f = sys._getframe(1)
        while f is not None and (f.f_code.co_filename.startswith("<frozen") or f.f_code.co_filename == __file__):
            f = f.f_back
        return f is not None and f.f_code.co_filename in STATE.files


def honour_path_additions(text: str, here: str):
    """A module's top-level sys.path additions that point into the repository make that folder's modules
    importable, as they are when the student runs the code (the loader skips the call itself)."""
    finder = STATE.finder
    if finder is None or "sys.path" not in text:
        return
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return
    for path in lm_paths.additions(tree, here):
        folder = lm_paths.into_repository(path, here, finder.root)
        if folder:
            for name, base in _names_in(folder, finder.tops, sys.modules).items():
                finder.tops[name] = base
            STATE.path_additions.append({"file": finder._show(here), "path": path[:300],
                                         "folder": os.path.relpath(folder, finder.root)})


def _has_py(d: str) -> bool:
    try:
        return any(n.endswith(".py") or (os.path.isdir(os.path.join(d, n)) and not n.startswith("."))
                   for n in os.listdir(d))
    except OSError:
        return False


def top_level_names(root: str) -> dict[str, str]:
    """The repository's importable top-level names (root and a src/ layout) -> the folder that holds them."""
    tops: dict[str, str] = {}
    for base in (os.path.join(root, "src"), root):
        tops.update(_names_in(base, tops, sys.modules))
    return tops


def shadowing(tops: dict[str, str]) -> frozenset:
    """The student's packages named like a standard-library module (a folder `code/`): served to the student's
    own imports (the grader's keep the standard library's); the child may have imported that module already."""
    return frozenset(n for n, base in tops.items() if n in sys.stdlib_module_names
                     and os.path.isdir(os.path.join(base, n)))


def _names_in(base: str, tops: dict, loaded) -> dict[str, str]:
    """Importable names in one folder not yet in tops. A package folder named like a standard-library module
    is the student's (their `import code.model` means it) unless the grader needs that module itself."""
    out: dict[str, str] = {}
    if not os.path.isdir(base):
        return out
    for n in sorted(os.listdir(base)):
        p = os.path.join(base, n)
        name = n[:-3] if n.endswith(".py") and os.path.isfile(p) else n if os.path.isdir(p) else None
        if not name or not name.isidentifier() or n in SKIP_DIRS or name in PROTECTED or name in tops or name in out:
            continue
        if os.path.isdir(p) and not _has_py(p):
            continue
        stdlib = name in sys.stdlib_module_names
        if stdlib and (not os.path.isdir(p) or name in GRADER_STDLIB or name in sys.builtin_module_names):
            continue
        if name in loaded and name != "tests" and not stdlib:
            continue
        out[name] = base
    return out


def find_adapters(root: str) -> str | None:
    for rel in ("tests/adapters.py", "adapters.py", "tests/adapter.py"):
        if os.path.isfile(os.path.join(root, rel)):
            return rel
    return None


def load(path: str, display: str | None, raw: bytes | None,
         timeout_s: float = LOAD_TIMEOUT_S) -> tuple[Source, types.ModuleType]:
    """Load a repository (a folder) or one file; errors of the adapters' own definitions (and a load that
    runs past the load limit: the package's imports included) are SubmissionError."""
    try:
        with load_limit(timeout_s):
            return _load(path, display, raw)
    except LoadTimeout as e:                               # raised outside the adapters' own exec
        raise SubmissionError("timeout", f"LoadTimeout: {e}", student_line(e.__traceback__, None)) from None


def _load(path: str, display: str | None, raw: bytes | None) -> tuple[Source, types.ModuleType]:
    display = display or path
    if raw is not None:                                  # one file that defines the adapters
        source = read_source(display, raw)
        source.run_path = path
        STATE.files[path] = display
        return source, _run_adapters(source, "submission", None)
    root = os.path.realpath(path)
    rel = find_adapters(root)
    if rel is None:
        raise SubmissionError("missing-adapters", "the folder has no tests/adapters.py (the CS336 adapter "
                              "functions) and no adapters.py")
    tops = top_level_names(root)
    finder = RepoFinder(tops, root, display.rstrip("/"), shadowing(tops))
    for name in finder.shadow:        # the student's `import code` must reach the finder, not the cache
        sys.modules.pop(name, None)
    STATE.finder = finder
    sys.meta_path.insert(0, finder)
    full = os.path.join(root, rel)
    with open(full, "rb") as f:
        raw = f.read()
    source = read_source(finder._show(full), raw)
    source.run_path = full
    honour_path_additions(source.text, full)
    package = "tests" if rel.startswith("tests/") and "tests" in tops else None
    name = "tests.adapters" if package else "adapters"
    if package:
        importlib.import_module("tests")   # tests/__init__.py, if any, through the same filter
    return source, _run_adapters(source, name, package)


def _run_adapters(source: Source, name: str, package: str | None) -> types.ModuleType:
    tree = filter_module(source)
    module = types.ModuleType(name)
    module.__file__ = source.code_path
    if package:
        module.__package__ = package
    sys.modules[name] = module
    try:
        exec_definitions(tree, source.code_path, module.__dict__, source.path)
    except BaseException as e:
        line = student_line(e.__traceback__, source.code_path)
        kind = "exit-during-load" if isinstance(e, SystemExit) else "definition-error"
        kind = "timeout" if isinstance(e, LoadTimeout) else kind
        raise SubmissionError(kind, f"{type(e).__name__}: {cut(e, 500)}", line)
    source.skipped.extend(STATE.skipped)
    return module
