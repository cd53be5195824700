"""The two submission forms of assignment `lm`, built from a model text.

A model text is reference_model/lm.py or a mutant's version of it. The adapter
functions come from reference_model/lm_adapters.py, whose one import block
(``from reference_model.lm import (...)``) is rewritten:

  repo_files(text)   a student repository: tests/adapters.py importing from
                     ``cs336_basics.model`` (the course's package name) and
                     cs336_basics/model.py holding the model text;
  single_file(text)  one .py file: the model text, then the adapter functions.

Probes that need a mutant's adapters (fingerprints) can ``load_module(mutant_single_file(m))``;
a mutant edits either the model or (interface mutants) the adapters.
"""
from __future__ import annotations

import ast
import linecache
import types

from .model import reference_source, source

ADAPTERS = "reference_model/lm_adapters.py"
PACKAGE = "cs336_basics"
MODULE = "model"
_IMPORT_HEAD = "from reference_model.lm import ("
NEUTRAL_DOCSTRING = ('"""A Transformer language model: linear and embedding layers, RMSNorm, SwiGLU, '
                     'attention with RoPE,\nthe LM, and its loss, optimizer, schedule and batches."""\n')


def _import_block(adapters: str) -> tuple[int, int]:
    """Start and end offsets of the import block of the model (the one thing rewritten)."""
    start = adapters.index(_IMPORT_HEAD)
    end = adapters.index(")\n", start) + 2
    return start, end


def neutral(text: str) -> str:
    """The model text without its module docstring (which says it is the reference), with a neutral one."""
    tree = ast.parse(text)
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        lines = text.splitlines(keepends=True)
        return NEUTRAL_DOCSTRING + "".join(lines[first.end_lineno:])
    return text


def adapters_source(module: str = f"{PACKAGE}.{MODULE}", adapters: str | None = None) -> str:
    """tests/adapters.py importing the model from ``module``."""
    adapters = adapters or reference_source(ADAPTERS)
    start, end = _import_block(adapters)
    block = adapters[start:end].replace("from reference_model.lm import", f"from {module} import", 1)
    body = adapters[:start] + block + adapters[end:]
    return '"""Adapters: the course tests call these; they wrap our modules."""\n' + _after_docstring(body)


def _after_docstring(text: str) -> str:
    tree = ast.parse(text)
    first = tree.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        return "".join(text.splitlines(keepends=True)[first.end_lineno:])
    return text


def single_file(model_text: str, adapters: str | None = None) -> str:
    """One .py file: the (neutral) model text followed by the adapter functions."""
    adapters = adapters or reference_source(ADAPTERS)
    start, end = _import_block(adapters)
    tail = _after_docstring(adapters[:start]).replace("from __future__ import annotations\n", "")
    tail = "\n".join(line for line in tail.splitlines() if line.strip()) + "\n"   # the remaining imports
    functions = adapters[end:].lstrip("\n")
    return (neutral(model_text).rstrip("\n") + "\n\n\n# " + "-" * 76 + "\n# adapters\n# " + "-" * 76
            + "\n" + tail + "\n\n" + functions)


def repo_files(model_text: str, package: str = PACKAGE, adapters: str | None = None) -> dict[str, str]:
    """Relative path -> text of a student repository holding this model."""
    return {
        "tests/__init__.py": "",
        "tests/adapters.py": adapters_source(f"{package}.{MODULE}", adapters),
        f"{package}/__init__.py": "",
        f"{package}/{MODULE}.py": neutral(model_text),
    }


def reference_single_file() -> str:
    return single_file(reference_source("reference_model/lm.py"))


def reference_repo_files() -> dict[str, str]:
    return repo_files(reference_source("reference_model/lm.py"))


def load_module(text: str, name: str = "mtx_lm_variant") -> types.ModuleType:
    """Execute a single-file text (ours: the reference or a mutant, never a student's) as a fresh module."""
    module = types.ModuleType(name)
    module.__file__ = f"<{name}>"
    linecache.cache[module.__file__] = (len(text), None, text.splitlines(True), module.__file__)  # its lines, for locations
    exec(compile(text, module.__file__, "exec"), module.__dict__)
    return module


def texts(mutant) -> tuple[str, str]:
    """(model text, adapters text) of an lm mutant: it edits one of the two files."""
    if mutant.reference == ADAPTERS:
        return reference_source("reference_model/lm.py"), source(mutant)
    return source(mutant), reference_source(ADAPTERS)


def mutant_single_file(mutant) -> str:
    model, adapters = texts(mutant)
    return single_file(model, adapters)


def mutant_repo_files(mutant, package: str = PACKAGE) -> dict[str, str]:
    model, adapters = texts(mutant)
    return repo_files(model, package, adapters)
