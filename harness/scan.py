"""The submission's text, read and never run: what reaches into the grader, and where it edits attributes.

* `scan_source()` (the parent, check `tamper-static`) names constructs that reach into the grader's
  process: importing the harness or the reference solution, frame and gc introspection, ctypes, raw
  file-descriptor calls, assignments to attributes of torch/builtins/math, `__torch_function__`
  overrides, dynamic code (eval/exec/__import__). The child cannot suppress this finding.
* `edit_sites()` (the child's guard) maps an attribute name to the line that assigns it, so that a tamper
  finding names the student's line.
"""
from __future__ import annotations

import ast
import re

from .identity import GRADER_PREFIXES, PACK_PACKAGES

_PROTECTED_ROOTS = ("torch", "builtins", "math", "json", "numpy") + GRADER_PREFIXES
# Configuration, not monkeypatching: torch.backends.cudnn.deterministic = True, torch._dynamo.config.x = ...
_ALLOWED_ASSIGN = ("torch.backends.", "torch._dynamo.config.", "torch._inductor.config.", "torch.fx.experimental.")
_INTROSPECTION_ATTRS = {
    "_getframe": "frame introspection (sys._getframe)",
    "f_locals": "frame introspection (f_locals)", "f_globals": "frame introspection (f_globals)",
    "f_back": "frame introspection (f_back)", "f_builtins": "frame introspection (f_builtins)",
    "tb_frame": "frame introspection (tb_frame)", "gi_frame": "frame introspection (gi_frame)",
    "currentframe": "frame introspection (inspect.currentframe)",
    "get_objects": "heap introspection (gc.get_objects)", "get_referrers": "heap introspection (gc.get_referrers)",
    "get_referents": "heap introspection (gc.get_referents)",
    "dup2": "raw file descriptors (os.dup2)", "closerange": "raw file descriptors (os.closerange)",
    "fdopen": "raw file descriptors (os.fdopen)",
    "cell_contents": "closure editing (cell_contents)", "__code__": "code object editing (__code__)",
    "co_filename": "code object editing (co_filename)", "__wrapped__": "function wrapping internals (__wrapped__)",
    "import_module": "dynamic import (importlib.import_module)",
    "_push_on_torch_function_stack": "torch mode stack manipulation",
    "_push_on_torch_dispatch_stack": "torch mode stack manipulation",
}
_FORBIDDEN_IMPORTS = {
    "harness": "imports the grader (harness)", "mtxdiag": "imports the grader (mtxdiag)",
    "reference_model": "imports the reference solution (reference_model)",
    "mutants": "imports the grader's mutant library", "ctypes": "imports ctypes", "_ctypes": "imports ctypes",
    "cffi": "imports cffi",
}
_FORBIDDEN_IMPORTS.update({p: f"imports the grader's pack ({p}: its reference)" for p in PACK_PACKAGES
                           if p not in _FORBIDDEN_IMPORTS})
_NATIVE_IMPORTS = ("ctypes", "_ctypes", "cffi")
_DYNAMIC_CALLS = {"eval": "dynamic code (eval)", "exec": "dynamic code (exec)", "compile": "dynamic code (compile)",
                  "__import__": "dynamic import (__import__)", "import_module": "dynamic import (import_module)"}
MAX_SCAN_CHARS = 2_000_000      # edit_sites(): the child's guard reads lines from texts up to this size
MAX_AST_CHARS = 16_000_000      # scan_source(): parsed up to this size; beyond it (or unparsable for size),
#                                 scan_stream() reads the file in chunks, whatever its size
_STREAM = re.compile(
    rb"\b(?:import|from)\s+(harness|mtxdiag|reference_model|mutants|ctypes|_ctypes|cffi)\b"
    rb"|\b(_getframe|_current_frames|f_back|f_locals|f_globals|f_builtins|tb_frame|gi_frame|cr_frame|currentframe"
    rb"|get_objects|get_referrers|get_referents|__builtins__|cell_contents|__code__|dup2|closerange"
    rb"|__torch_function__|__torch_dispatch__|_push_on_torch_function_stack|_push_on_torch_dispatch_stack)\b"
    rb"|\b(eval|exec|__import__|import_module)\s*\("
    rb"|(/proc/)")
_STREAM_WHAT = {"__torch_function__": "defines __torch_function__ (changes what torch calls do)",
                "__torch_dispatch__": "defines __torch_dispatch__ (changes what torch calls do)",
                "__builtins__": "uses __builtins__", "/proc/": "reads /proc"}


def _dotted(node) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def scan_source(text: str) -> list[dict]:
    """Constructs that reach into the grader's process, as [{"line", "what"}]; [] if the text does not parse."""
    if not isinstance(text, str):
        return []
    if len(text) > MAX_AST_CHARS:
        return scan_stream_text(text)
    try:
        tree = ast.parse(text)
    except (RecursionError, MemoryError, OverflowError):
        return scan_stream_text(text)        # too big or too deep to parse: the token scan still reads it all
    except (SyntaxError, ValueError):
        return []
    aliases = {}   # local name -> full module path, from the file's imports
    found = []

    def flag(node, what):
        found.append({"line": getattr(node, "lineno", None), "what": what})

    try:
        nodes = list(ast.walk(tree))
    except RecursionError:
        return []
    used = {n.id for n in nodes if isinstance(n, ast.Name)}

    def forbidden(node, root: str, bound: list[str]) -> None:
        # a native-access import none of whose names the file ever reads (an editor's stray auto-import, `from
        # ctypes import alignment`) reaches nothing: not flagged. Any native call it could still make is recorded
        # at run time (child/audit.py: ctypes and cffi's audit events), and the grader's modules are always flagged
        if root in _NATIVE_IMPORTS and "*" not in bound and not used.intersection(bound):
            return
        flag(node, _FORBIDDEN_IMPORTS[root])

    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                root = a.name.split(".")[0]
                if root in _FORBIDDEN_IMPORTS:
                    forbidden(node, root, [a.asname or root])
                aliases[a.asname or root] = a.name if a.asname else root
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            root = mod.split(".")[0]
            if root in _FORBIDDEN_IMPORTS and node.level == 0:
                forbidden(node, root, [a.asname or a.name for a in node.names])
            for a in node.names:
                aliases[a.asname or a.name] = f"{mod}.{a.name}" if mod else a.name
    for node in nodes:
        if isinstance(node, ast.Attribute) and node.attr in _INTROSPECTION_ATTRS:
            flag(node, _INTROSPECTION_ATTRS[node.attr])
        elif isinstance(node, ast.Name) and node.id == "__builtins__":
            flag(node, "uses __builtins__")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _DYNAMIC_CALLS \
                and not aliases.get(node.func.id, "").startswith("torch."):     # from torch import compile
            flag(node, _DYNAMIC_CALLS[node.func.id])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "/proc/" in node.value:
            flag(node, "reads /proc")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.name in ("__torch_function__", "__torch_dispatch__"):
            flag(node, f"defines {node.name} (changes what torch calls do)")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
                    if isinstance(e, ast.Attribute):
                        full = _full(e, aliases)
                        if full and full.split(".")[0] in _PROTECTED_ROOTS and \
                                not full.startswith(_ALLOWED_ASSIGN):
                            flag(node, f"assigns {full} (monkeypatching)")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("setattr", "delattr") and node.args:
            full = _full(node.args[0], aliases)
            if full and full.split(".")[0] in _PROTECTED_ROOTS and not full.startswith(_ALLOWED_ASSIGN):
                flag(node, f"{node.func.id}() on {full} (monkeypatching)")
    uniq, seen = [], set()
    for f in sorted(found, key=lambda f: (f["line"] or 0, f["what"])):
        if f["what"] not in seen:
            seen.add(f["what"])
            uniq.append(f)
    return uniq[:50]


def scan_stream(chunks, lines: bool = True) -> list[dict]:
    """The same constructs, found by their tokens in a text read in chunks (bytes) of any size: what a file
    too big to parse holds. Coarser than the parse (a comment naming them counts), used only beyond it."""
    found, seen, tail, line = [], set(), b"", 1
    for chunk in chunks:
        buf = tail + chunk
        keep = min(len(buf), 256)            # a token cut by the chunk's end is found in the next buffer
        for m in _STREAM.finditer(buf):
            if m.end() > len(buf) - keep and chunk:
                break
            tok = next(g for g in m.groups() if g).decode("ascii", "replace")
            what = _STREAM_WHAT.get(tok) or _FORBIDDEN_IMPORTS.get(tok) or _INTROSPECTION_ATTRS.get(tok) or \
                _DYNAMIC_CALLS.get(tok) or f"uses {tok}"
            if what not in seen and len(found) < 50:
                seen.add(what)
                found.append({"line": (line + buf.count(b"\n", 0, m.start())) if lines else None, "what": what})
        cut = max(0, len(buf) - keep) if chunk else len(buf)
        line += buf.count(b"\n", 0, cut)
        tail = buf[cut:]
        if not chunk:
            break
    return found


def scan_stream_text(text: str) -> list[dict]:
    data = text.encode("utf-8", "replace")
    return scan_stream(iter([data[i:i + (1 << 20)] for i in range(0, len(data), 1 << 20)] + [b""]))


def scan_file(path, lines: bool = True) -> list[dict]:
    """scan_stream() over a file, 1 MB at a time."""
    def chunks():
        with open(path, "rb") as f:
            while True:
                b = f.read(1 << 20)
                yield b
                if not b:
                    return
    return scan_stream(chunks(), lines)


def _full(node, aliases) -> str | None:
    d = _dotted(node)
    if not d:
        return None
    root, _, rest = d.partition(".")
    if root in aliases:
        base = aliases[root]
        return f"{base}.{rest}" if rest else base
    if root in ("builtins",):
        return d
    return None


class EditSites:
    """Where the student's text touches attributes of torch, builtins or the grader (line of first use)."""

    def __init__(self):
        self.full = {}         # "torch.Tensor.softmax" -> line of an assignment/setattr/del, the owner known
        self.assigned = {}     # "step" -> line, when the owner is not known from the text (setattr(x, ...))
        self.referenced = {}   # attribute name -> line of any use of it on a protected module
        self.imported = {}     # local name -> line of the import that bound it


def edit_sites(text: str) -> EditSites:
    """Read the student's text (never run it) for the lines that can change what the checks rely on.

    `torch.allclose = ...`, `setattr(torch.Tensor, "abs", ...)`, `vars(torch)["max"] = ...`,
    `sys.modules["torch"] = ...`, `f.__code__ = ...`: the attribute name maps to the statement's line. Only
    targets on torch, builtins, math, numpy or the grader count (`self.step = 0` is the student's own)."""
    sites = EditSites()
    if not isinstance(text, str) or len(text) > MAX_SCAN_CHARS:
        return sites
    try:
        tree = ast.parse(text)
        nodes = list(ast.walk(tree))
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return sites
    aliases = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
                sites.imported.setdefault(a.asname or a.name.split(".")[0], node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                sites.imported.setdefault(a.asname or a.name, node.lineno)

    def protected(expr) -> bool:
        full = _full(expr, aliases)
        return bool(full) and full.split(".")[0] in _PROTECTED_ROOTS + ("sys",) and \
            not full.startswith(_ALLOWED_ASSIGN)

    def namespace(expr) -> bool:
        """A namespace dict: `X.__dict__`, `vars(X)`, `sys.modules`, `globals()`, or a protected module's dict."""
        if isinstance(expr, ast.Attribute) and expr.attr in ("__dict__", "modules"):
            return True
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in ("vars", "globals"):
            return True
        return protected(expr)

    def owner_of(ns) -> str | None:
        """`torch` for `vars(torch)` and `torch.__dict__`; None when the namespace's owner is not known."""
        if isinstance(ns, ast.Attribute) and ns.attr == "__dict__":
            return _full(ns.value, aliases)
        if isinstance(ns, ast.Call) and isinstance(ns.func, ast.Name) and ns.func.id == "vars" and ns.args:
            return _full(ns.args[0], aliases)
        return None

    def place(owner, name, line):
        """A known owner: its full name only (`torch.optim.Adam.step` says nothing about AdamW.step); an
        unknown one (`setattr(x, "step", f)`): the bare name, for whatever owner it turns out to be."""
        if not isinstance(name, str):
            return
        if owner:
            mark(sites.full, f"{owner}.{name}", line)
        else:
            mark(sites.assigned, name, line)

    def mark(d, name, line):
        if isinstance(name, str):
            d[name] = min(d.get(name, line), line)

    for node in nodes:
        if isinstance(node, ast.Attribute) and protected(node.value):
            mark(sites.referenced, node.attr, node.lineno)
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for tgt in targets:
                for e in (tgt.elts if isinstance(tgt, (ast.Tuple, ast.List)) else [tgt]):
                    if isinstance(e, ast.Attribute) and (protected(e.value) or e.attr.startswith("__")):
                        place(_full(e.value, aliases), e.attr, node.lineno)
                    elif isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Constant) and \
                            namespace(e.value):
                        place(owner_of(e.value), e.slice.value, node.lineno)
        elif isinstance(node, ast.Call) and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
            first = node.args[0]
            if name in ("setattr", "delattr", "__setattr__", "__delattr__") and \
                    (protected(first) or not isinstance(first, ast.Name)) or name == "__setitem__" and namespace(first):
                place(_full(first, aliases) if name != "__setitem__" else owner_of(first), node.args[1].value,
                      node.lineno)
    return sites
