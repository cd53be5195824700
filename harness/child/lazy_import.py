"""Plotting and data libraries a submission imports at its top level, imported when first used.

A lesson imports matplotlib.pyplot for its experiments (which the loader skips): importing it costs a cold
check ~0.4 s (0.9 s on a busy machine) before any probe, and no probe needs it. The loader rewrites such
top-level imports so that the name is bound to a LazyModule, which imports the real module on its first
attribute access (plt.plot inside train(), a default argument that reads plt.cm at definition time) and
behaves as that module from then on. Only modules that are installed (find_spec, which executes nothing):
an import of a missing one stays as it is and fails the load as before. `from X import name` of anything
but a submodule, `import *` and imports inside functions, `if` or `try` are left alone.

Runs in the child. A warm worker has these modules imported already: there the first use costs nothing, and
a cold child and a warm fork bind the same kind of object, so their results do not differ.
"""
from __future__ import annotations

import ast
import importlib
import importlib.machinery
import importlib.util
import sys
import types

LAZY_ROOTS = ("matplotlib", "seaborn", "pandas", "plotly", "sklearn", "scipy", "IPython")
FACTORY = "__mtxdiag_lazy__"      # bound in the module while its top level runs, removed afterwards


class LazyModule(types.ModuleType):
    """Stands for module `name`; on the first attribute access imports `imports` (name and the submodules
    the statement named) and from then on hands out the real module's attributes."""

    def __init__(self, name: str, imports: tuple):
        super().__init__(name)
        object.__setattr__(self, "_mtxdiag_imports", tuple(imports))

    def _mtxdiag_resolve(self):
        real = self.__dict__.get("_mtxdiag_real")
        if real is None:
            for m in self.__dict__["_mtxdiag_imports"]:
                importlib.import_module(m)
            real = sys.modules[self.__name__]
            object.__setattr__(self, "_mtxdiag_real", real)
        return real

    def __getattr__(self, name):          # only for names the stand-in does not hold itself
        return getattr(self._mtxdiag_resolve(), name)

    def __setattr__(self, name, value):
        setattr(self._mtxdiag_resolve(), name, value)

    def __dir__(self):
        return dir(self._mtxdiag_resolve())

    def __repr__(self):
        return f"<lazily imported module {self.__name__!r}>"


def lazy(name: str, *imports: str) -> LazyModule:
    """What a rewritten import binds (the module's FACTORY while its top level runs)."""
    return LazyModule(name, imports or (name,))


def _installed(name: str) -> bool:
    """Is `name` (dotted) importable? Found without executing anything: find_spec of a submodule would
    import its package, so submodules are looked up in the package's folders."""
    root, *rest = name.split(".")
    try:
        spec = importlib.util.find_spec(root) if root not in sys.modules else sys.modules[root].__spec__
        for i in range(len(rest)):
            if spec is None or spec.submodule_search_locations is None:
                return False
            spec = importlib.machinery.PathFinder.find_spec(".".join([root, *rest[:i + 1]]),
                                                            list(spec.submodule_search_locations))
        return spec is not None
    except (ImportError, ValueError, AttributeError):
        return False


def _is_lazy(name: str | None) -> bool:
    return bool(name) and name.split(".")[0] in LAZY_ROOTS and _installed(name)


def _bind(name: str, module: str, imports: tuple, like: ast.stmt) -> ast.stmt:
    """`name = __mtxdiag_lazy__(module, *imports)` at the import's own line."""
    call = ast.Call(ast.Name(FACTORY, ast.Load()), [ast.Constant(module)] + [ast.Constant(m) for m in imports], [])
    return ast.fix_missing_locations(ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], call), like))


def _rewrite(stmt: ast.stmt) -> list[ast.stmt] | None:
    """The bindings that replace one top-level import, or None to leave it as it is."""
    if isinstance(stmt, ast.Import):
        if not all(_is_lazy(a.name) for a in stmt.names):
            return None
        out = []
        for a in stmt.names:
            if a.asname:                                  # import matplotlib.pyplot as plt
                out.append(_bind(a.asname, a.name, (a.name,), stmt))
            else:                                         # import matplotlib.pyplot: binds the package
                root = a.name.split(".")[0]
                out.append(_bind(root, root, (a.name,), stmt))
        return out
    if isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module:
        names = stmt.names
        if any(a.name == "*" for a in names) or not _is_lazy(stmt.module):
            return None
        subs = [f"{stmt.module}.{a.name}" for a in names]
        if not all(_installed(m) for m in subs):
            return None                                   # a function or class, not a submodule: eager
        return [_bind(a.asname or a.name, m, (m,), stmt) for a, m in zip(names, subs)]
    return None


def rewrite(tree: ast.Module) -> bool:
    """Rewrite the module's top-level imports of LAZY_ROOTS in place; True if any was."""
    body, changed = [], False
    for stmt in tree.body:
        new = _rewrite(stmt)
        if new is None:
            body.append(stmt)
        else:
            body.extend(new)
            changed = True
    tree.body = body
    return changed
