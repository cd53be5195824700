"""Where a student's `sys.path.append(...)` / `sys.path.insert(0, ...)` points, without running it.

The definitions-only loader skips module-level calls, so a repository that reaches its own folders through
sys.path (`sys.path.append(str(Path(__file__).parent))`, or a path hard-coded on the student's machine,
`/home/me/assignment1-basics/cs336_basics`) would lose those imports. The argument is evaluated statically
(string constants, __file__, Path(...).parent/.parents[n]/.resolve(), `/`, os.path.dirname/abspath/join);
a folder inside the repository is honoured, and so is a foreign absolute path whose tail names a folder of
the repository. Nothing outside the repository is ever added. Child side only; no torch.
"""
from __future__ import annotations

import ast
import os

_IDENTITY = {"resolve", "absolute", "expanduser", "__str__"}
_PATH_CTORS = {"Path", "PurePath", "PosixPath", "str", "abspath", "realpath", "normpath", "fspath"}


def _eval(node, here: str):
    """A path string, or None when the expression is not one of the shapes above."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id == "__file__":
        return here
    if isinstance(node, ast.Attribute):
        if node.attr == "parent":
            v = _eval(node.value, here)
            return os.path.dirname(os.path.normpath(v)) if v is not None else None
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents":
        v = _eval(node.value.value, here)
        n = node.slice.value if isinstance(node.slice, ast.Constant) else None
        if v is None or not isinstance(n, int) or n < 0:
            return None
        v = os.path.normpath(v)
        for _ in range(n + 1):
            v = os.path.dirname(v)
        return v
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        a, b = _eval(node.left, here), _eval(node.right, here)
        return os.path.join(a, b) if a is not None and b is not None else None
    if isinstance(node, ast.Call):
        fn = node.func
        name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else None
        if isinstance(fn, ast.Attribute) and name in _IDENTITY and not node.args:
            return _eval(fn.value, here)
        args = [_eval(a, here) for a in node.args]
        if any(a is None for a in args) or node.keywords:
            return None
        if name in _PATH_CTORS and len(args) == 1:
            return os.path.abspath(os.path.join(os.path.dirname(here), args[0])) if name in ("abspath", "realpath") \
                else args[0]
        if name == "dirname" and len(args) == 1:
            return os.path.dirname(os.path.normpath(args[0]))
        if name == "join" and args:
            return os.path.join(*args)
    return None


def additions(tree: ast.Module, here: str) -> list[str]:
    """The paths a module adds to sys.path at its top level (as written, not yet mapped)."""
    out = []
    for stmt in tree.body:
        call = stmt.value if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) else None
        fn = call.func if call is not None else None
        if not (isinstance(fn, ast.Attribute) and fn.attr in ("append", "insert")
                and isinstance(fn.value, ast.Attribute) and fn.value.attr == "path"
                and isinstance(fn.value.value, ast.Name) and fn.value.value.id == "sys"):
            continue
        arg = call.args[-1] if call.args else None
        v = _eval(arg, here) if arg is not None else None
        if v:
            out.append(v)
    return out


def into_repository(path: str, here: str, root: str) -> str | None:
    """The repository folder a sys.path entry stands for, or None (outside it, or no such folder)."""
    root = os.path.realpath(root)
    if not os.path.isabs(path):       # relative: to the importing file's folder, then to the repository's top
        for base in (os.path.dirname(here), root):
            p = os.path.realpath(os.path.join(base, path))
            if (p == root or p.startswith(root + os.sep)) and os.path.isdir(p):
                return p
        return None
    p = os.path.realpath(path)
    if (p == root or p.startswith(root + os.sep)) and os.path.isdir(p):
        return p
    parts = [x for x in os.path.normpath(path).split(os.sep) if x]
    for k in range(1, len(parts)):     # the longest tail of a foreign path that names a repository folder
        cand = os.path.join(root, *parts[k:])
        if os.path.isdir(cand):
            return os.path.realpath(cand)
    return None
