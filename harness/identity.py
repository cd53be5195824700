"""Identity comparisons for the guard (guard.py, capture.py): what of a function or a container can change in
place, compared with `is` only (`==` could run student code), and which module names are the grader's own."""
from __future__ import annotations

import types

from .assignments import FOUND

MISSING = object()
PACKAGES = ("harness", "reference_model", "mutants")     # the grader's packages on disk (shipped, bound, hidden)
# the installed packs' top-level packages (their references live there): the grader's too, hidden from the
# student's code and never served from the student's folder (assignments.FOUND, harness/packs/discover.py)
PACK_PACKAGES = tuple(sorted({f.value.partition(":")[0].strip().split(".")[0] for f in FOUND
                              if f.pack is not None} - set(PACKAGES)))
GRADER_PREFIXES = PACKAGES + ("mtxdiag",) + PACK_PACKAGES   # module names that are the grader's own


def is_grader_name(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in GRADER_PREFIXES) or name == "__main__"


def fn_parts(v):
    """What of a Python function can be changed in place: code, defaults, keyword defaults, closure contents."""
    cells = ()
    if v.__closure__:
        cells = []
        for c in v.__closure__:
            try:
                cells.append(c.cell_contents)
            except ValueError:
                cells.append(MISSING)
        cells = tuple(cells)
    kw = v.__kwdefaults__
    return (v.__code__, v.__defaults__, kw, tuple(kw.items()) if isinstance(kw, dict) else None, cells)


def parts_equal(a, b) -> bool:
    """Identity comparison only: `==` could run student code (a default's __eq__)."""
    if a[0] is not b[0] or a[1] is not b[1] or a[2] is not b[2] or len(a[4]) != len(b[4]):
        return False
    if (a[3] is None) != (b[3] is None) or a[3] is not None and (
            len(a[3]) != len(b[3]) or any(x[0] != y[0] or x[1] is not y[1] for x, y in zip(a[3], b[3]))):
        return False
    return all(x is y for x, y in zip(a[4], b[4]))


def code_of(v):
    """The Python code behind a value (a function, method, static/class method, partial), or None.

    Only exact types are unwrapped: attribute access on the student's own objects could run their code."""
    import functools
    for _ in range(4):
        if type(v) in (staticmethod, classmethod, types.MethodType):
            v = v.__func__
        elif type(v) is functools.partial:
            v = v.func
        else:
            break
    return v.__code__ if type(v) is types.FunctionType else None


def cell_full(c) -> bool:
    try:
        c.cell_contents
        return True
    except ValueError:
        return False


def same_container(a, b) -> bool:
    if type(a) is not type(b) or len(a) != len(b):
        return False
    try:
        if isinstance(a, dict):
            return all(k in b and b[k] is v for k, v in a.items())
        if isinstance(a, (set, frozenset)):
            return a == b
        return all(x is y for x, y in zip(a, b))
    except Exception:
        return False


def inherited(cls, name):
    """What an attribute added to a class shadows: the first base class that defines it (MISSING if none)."""
    for base in type.__dict__["__mro__"].__get__(cls)[1:]:
        d = type.__dict__["__dict__"].__get__(base)
        if name in d:
            return d[name]
    return MISSING


def wrapped_chain(obj, depth: int = 6) -> list:
    """obj and what it wraps through `__wrapped__` (functools.wraps), innermost last; exact functions only."""
    out = [obj]
    while len(out) < depth and type(out[-1]) is types.FunctionType:
        inner = out[-1].__dict__.get("__wrapped__")
        if inner is None:
            break
        out.append(inner)
    return out


def wraps(new, old, depth: int = 6) -> bool:
    """Is `new` a wrapper of exactly `old`: through `__wrapped__` (functools.wraps) or a closure cell holding
    it (or its function, for a method), a few levels deep? Only exact function types are read."""
    targets = (old, getattr(old, "__func__", None) if type(old) in (staticmethod, classmethod) else None)
    f = new
    for _ in range(depth):
        if f is old:
            return True
        if type(f) in (staticmethod, classmethod):
            f = f.__func__
        if type(f) is not types.FunctionType:
            return False
        for c in f.__closure__ or ():
            try:
                v = c.cell_contents
            except ValueError:
                continue
            if any(v is t for t in targets if t is not None) or (type(v) is types.MethodType and v.__func__ is old):
                return True
        f = f.__dict__.get("__wrapped__")
        if f is None:
            return False
    return False
