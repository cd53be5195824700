"""What the role probes share: building the student's and the reference's piece from one seed, running student
code with its line kept, the check format, and the student's lines from the syntax tree of their file."""
from __future__ import annotations

import ast
import functools
import inspect
import sys
from functools import lru_cache

import torch

from ..base import Skip, check, manual_seed
from . import remote
from .remote import RemoteFailure


class StudentFailure(Exception):
    """The student's code raised: the exception and the student's innermost line."""

    def __init__(self, exc: BaseException, line: int | None, where: str):
        super().__init__(f"{type(exc).__name__}: {exc}")
        self.exc, self.line, self.where = exc, line, where


# -- the student's file and lines ------------------------------------------------------------------------------
def source_key(rctx, filename: str | None) -> str | None:
    """The key of `source` that a running file is (the submission's path it was loaded from)."""
    if not filename:
        return None
    parts = filename.replace("\\", "/").split("/")

    def tail(key: str) -> int:      # how many trailing path components the running file and the key share
        kp, n = key.replace("\\", "/").split("/"), 0
        while n < min(len(kp), len(parts)) and kp[-1 - n] == parts[-1 - n]:
            n += 1
        return n
    best = max(rctx.source, key=tail, default=None)      # the loader may show the file by its original path
    if best is None:
        return None
    n = tail(best)
    return best if n >= min(2, len(best.replace("\\", "/").split("/"))) and n > 0 else None


def owner_class(obj):
    """The class a binding's target lives in (the class itself, or a method's class)."""
    if inspect.isclass(obj):
        return obj
    remote = getattr(obj, "__mtxdiag_owner__", None)     # a method of a class the model server holds
    if remote is not None:
        return remote
    qual = getattr(obj, "__qualname__", "")
    mod = sys.modules.get(getattr(obj, "__module__", ""), None)
    head = qual.split(".")[0]
    found = getattr(mod, head, None) if mod else None
    return found if inspect.isclass(found) else None


def file_of(rctx) -> str | None:
    held = getattr(owner_class(rctx.student) or rctx.student, "__mtxdiag_file__", None)    # the server's piece
    if held is not None:
        return source_key(rctx, held)
    try:
        return source_key(rctx, inspect.getsourcefile(owner_class(rctx.student) or rctx.student))
    except (TypeError, OSError):
        return None


def where(rctx, line: int | None, key: str | None = None) -> dict | None:
    key = key or file_of(rctx)
    return {"file": key, "line": int(line)} if line and key else None


@lru_cache(maxsize=16)
def _tree(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def method(rctx, name: str) -> ast.FunctionDef | None:
    """The student's `name` method of the bound class, from its file's syntax tree."""
    key, cls = file_of(rctx), owner_class(rctx.student)
    tree = _tree(rctx.source.get(key, "")) if key else None
    if tree is None or cls is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            return next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == name), None)
    return None


def calls(fn: ast.AST | None, *names: str) -> list[ast.Call]:
    """The calls in `fn` whose callee ends with one of `names` (`x.masked_fill`, `torch.tril`), by line."""
    if fn is None:
        return []
    out = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and
           any(ast.unparse(n.func).split(".")[-1] == s for s in names)]
    return sorted(out, key=lambda n: n.lineno)


def discarded(fn: ast.AST | None, *names: str) -> int | None:
    """The line of a statement that only calls one of `names` out of place and drops the result
    (`scores.masked_fill(mask == 0, -inf)` on a line of its own)."""
    if fn is None:
        return None
    for node in ast.walk(fn):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and \
                ast.unparse(node.value.func).split(".")[-1] in names:
            return node.lineno
    return None


def lines_reading(fn: ast.AST | None, name: str) -> list[int]:
    """The statements of `fn` that read the variable `name`, by line."""
    if fn is None:
        return []
    out = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.If, ast.For, ast.While,
                                                                   ast.With, ast.ClassDef)):
            if any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) for n in ast.walk(node)):
                out.add(node.lineno)
        elif isinstance(node, ast.If) and any(isinstance(n, ast.Name) and n.id == name
                                              for n in ast.walk(node.test)):
            out.add(node.lineno)
    return sorted(out)


SHAPE_READS = ("shape", "size", "dtype", "device", "dim", "ndim", "ndimension", "numel")


def uses_inputs(fn: ast.FunctionDef | None) -> bool:
    """The method reads one of its inputs beyond its shape (the course's starters read only x.shape and return an
    empty tensor, or return the input untouched): False means not implemented. True when the syntax cannot be
    read."""
    if fn is None:
        return True
    names = set(params(fn))
    body = [st for st in fn.body if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant))
            and not isinstance(st, ast.Pass)]
    if len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.Name) and \
            body[0].value.id in names:
        return False            # the starter's `return x`: the input handed back untouched
    parents = {id(child): node for node in ast.walk(fn) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and node.id in names and isinstance(node.ctx, ast.Load):
            up = parents.get(id(node))
            if not (isinstance(up, ast.Attribute) and up.attr in SHAPE_READS):
                return True
    return False


def params(fn: ast.FunctionDef | None) -> list[str]:
    return [a.arg for a in fn.args.args[1:]] if fn is not None else []


# -- building and running ----------------------------------------------------------------------------------------
def accepted(fn, kwargs: dict) -> dict:
    try:
        ps = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return dict(kwargs)
    if any(p.kind is p.VAR_KEYWORD for p in ps.values()):
        return dict(kwargs)
    return {k: v for k, v in kwargs.items() if k in ps}


def run(rctx, where_: str, fn, *args, **kwargs):
    """Call student code; an exception becomes StudentFailure with the student's innermost line."""
    try:
        return fn(*args, **kwargs)
    except (Skip, StudentFailure):
        raise
    except RemoteFailure as e:  # raised in the model server: its line, checked against the file's length
        raise StudentFailure(e, e.line, where_) from None
    except Exception as e:  # the student's code may raise anything
        line, tb = None, e.__traceback__
        while tb is not None:
            if source_key(rctx, tb.tb_frame.f_code.co_filename):
                line = tb.tb_lineno
            tb = tb.tb_next
        raise StudentFailure(e, line, where_) from e


DEFAULT = object()      # an override that drops the binding's value: the constructor's own default


def build(rctx, which: str = "student", *pre, seed_offset: int = 0, **override):
    """The bound class, student's or reference's, built from (seed, offset) with the binding's init and
    `override` (only what its constructor accepts), on the device, in eval mode."""
    obj = rctx.student if which == "student" else rctx.reference
    cls = owner_class(obj)
    if cls is None:
        raise Skip(f"{rctx.binding.target} is not a class in the {which}'s code")
    kw = {k: v for k, v in accepted(cls, {**dict(rctx.binding.init), **override}).items() if v is not DEFAULT}
    manual_seed(rctx.seed * 1009 + seed_offset)
    if which == "student":
        try:
            m = run(rctx, f"{cls.__name__}(...)", cls, *pre, **kw)
        except StudentFailure as f:
            if f.line is None:          # refused in the call itself: the signature is the student's line
                init = method(rctx, "__init__")
                f.line = init.lineno if init is not None else None
            raise
    else:
        m = cls(*pre, **kw)
    m = m.to(rctx.device)
    m.eval()
    return m


def parameter_order(rctx) -> dict | None:
    """The student's constructor holds the reference's parameters in another order: the mechanism of a
    construction that raises (kind parameter-order), else None."""
    mine_cls, ref_cls = owner_class(rctx.student), owner_class(rctx.reference)
    try:
        mine = remote.parameter_names(mine_cls) if remote.is_remote(mine_cls) else \
            [p for p in inspect.signature(mine_cls).parameters]
        ref = [p for p in inspect.signature(ref_cls).parameters]
    except (TypeError, ValueError):
        return None
    if mine is None:
        return None
    shared = [p for p in ref if p in mine]
    if len(shared) < 2 or shared == [p for p in mine if p in ref]:
        return None
    text = f"the constructor takes ({', '.join(mine)}) where the contract's order is ({', '.join(ref)})"
    return {"kind": "parameter-order", "text": text}


def twin(rctx, student_module, *pre, **override):
    """The reference built like the student's, then given the student's weights when their parameter names and
    shapes agree (the course's starters name them): None when they do not."""
    ref = build(rctx, "reference", *pre, **override)
    try:
        ref.load_state_dict(student_module.state_dict(), strict=True)
    except (RuntimeError, KeyError, ValueError):
        return None
    return ref


def gen(rctx, offset: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(rctx.seed * 7919 + offset)


def randn(rctx, *shape, offset: int = 0, dtype=torch.float32):
    return torch.randn(*shape, generator=gen(rctx, offset), dtype=dtype).to(rctx.device)


def diff(a, b) -> float:
    a, b = torch.as_tensor(a).detach().double(), torch.as_tensor(b).detach().double()
    if a.shape != b.shape:
        return float("inf")
    d = (a - b).abs()
    return float("nan") if torch.isnan(d).any() else float(d.max()) if d.numel() else 0.0


# -- what a module's children are given and return ------------------------------------------------------------
def trace(m, call_) -> list:
    """The direct submodules in the order forward calls them: (name, input copy, output copy)."""
    if remote.is_remote(m):         # the model server hooks them (a "child" record per call)
        return remote.trace(m, call_)
    names = {id(sub): name for name, sub in m.named_children()}
    seen: list = []

    def pre(mod, args, kwargs):
        first = next((a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)), None)
        seen.append([names[id(mod)], None if first is None else first.detach().clone(), None])

    def post(mod, args, kwargs, out):
        for row in reversed(seen):
            if row[0] == names[id(mod)] and row[2] is None:
                row[2] = out.detach().clone() if isinstance(out, torch.Tensor) else None
                break
    hs = [sub.register_forward_pre_hook(pre, with_kwargs=True) for _, sub in m.named_children()] + \
        [sub.register_forward_hook(post, with_kwargs=True) for _, sub in m.named_children()]
    try:
        call_()
    finally:
        for h in hs:
            h.remove()
    return seen


def assigned_before(rctx, name: str) -> int | None:
    """The statement that makes what self.<name> is given: the last assignment of its first argument before the
    call, else the call."""
    fwd = method(rctx, "forward")
    hits = [c for c in calls(fwd, name) if ast.unparse(c.func) == f"self.{name}"]
    if not hits:
        return None
    arg = hits[0].args[0] if hits[0].args else (hits[0].keywords[0].value if hits[0].keywords else None)
    if isinstance(arg, ast.Name):
        made = [n.lineno for n in ast.walk(fwd) if isinstance(n, (ast.Assign, ast.AugAssign)) and
                n.lineno < hits[0].lineno and any(isinstance(t, ast.Name) and t.id == arg.id for t in
                                                  ast.walk(n.targets[0] if isinstance(n, ast.Assign) else n.target))]
        if made:
            return max(made)
    return hits[0].lineno


def received_mask(m, mask, call_) -> bool:
    """Whether any submodule was handed the layer's mask (positionally or by keyword)."""
    if remote.is_remote(m):         # the server compares what its submodules are handed with the mask's value
        return remote.received_mask(m, mask, call_)
    got = []

    def pre(mod, args, kwargs):
        if any(isinstance(a, torch.Tensor) and a.shape == mask.shape and torch.equal(a, mask)
               for a in list(args) + list(kwargs.values())):
            got.append(mod)
    hs = [sub.register_forward_pre_hook(pre, with_kwargs=True) for sub in m.modules() if sub is not m]
    try:
        call_()
    finally:
        for h in hs:
            h.remove()
    return bool(got)


def run_child(rctx, m, name: str, x):
    """The module's child `name` (a direct submodule) run on x, as student code."""
    if remote.is_remote(m):
        return run(rctx, f"{rctx.binding.component}.{name}", m.call_child, name, x)
    return run(rctx, f"{rctx.binding.component}.{name}", dict(m.named_children())[name], x)


def assign(m, values: dict) -> None:
    """Each named parameter's data replaced by the value given (its shape kept, its dtype may change)."""
    if remote.is_remote(m):
        m.assign(values)
        return
    mine = dict(m.named_parameters())
    for k, v in values.items():
        mine[k].data = v


# -- checks -------------------------------------------------------------------------------------------------------
def make(rctx, pid: str, status: str, measured=None, expected: str = "", detail: str = "", data=None,
         line: int | None = None) -> dict:
    return check(f"{rctx.binding.component}.{pid}", status, measured, expected, detail,
                 dict(data or {}, component=rctx.binding.component, role=rctx.binding.role), where(rctx, line))


def guarded(pid: str):
    """A probe body that returns checks; the student's exception becomes an `error` check with its line, a Skip
    a `skip` check with the reason."""
    def wrap(body):
        @functools.wraps(body)
        def probe(rctx) -> list[dict]:
            entry = "forward" if inspect.isclass(rctx.student) else rctx.binding.target.rsplit(".", 1)[-1]
            if not uses_inputs(method(rctx, entry)):
                return [make(rctx, pid, "skip", None, "", f"{rctx.binding.component}.{entry} is not implemented "
                             "(it reads none of its inputs)", {"not_implemented": True})]
            try:
                return body(rctx)
            except StudentFailure as f:
                data = {"message": str(f), "where": f.where}
                order = parameter_order(rctx) if f.where.endswith("(...)") else None
                if order:
                    data["mechanism"] = order
                return [make(rctx, pid, "error", None, "", f"{f.where}: {f}", data, f.line)]
            except RemoteFailure as f:      # the model server, outside a call the probe wrapped in run()
                return [make(rctx, pid, "error", None, "", f"{type(f).__name__}: {f}",
                             {"message": f"{type(f).__name__}: {f}", "where": "the model server"}, f.line)]
            except Skip as s:
                return [make(rctx, pid, "skip", None, "", str(s))]
        return probe
    return wrap
