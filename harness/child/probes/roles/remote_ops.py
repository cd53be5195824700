"""The prober's recorders served by the model server (issue 45, a one-file pack's probes).

A probe of the `block` assignment watches the student's torch calls with the one recorder (child/recorder.py:
`intercept.watch`, `trace.recorder`, `heads_layout.recorder`). Over the model server the student's code runs
there, so a recorder active here when a proxy calls it is sent along as its options (its callables named by their
paths under `torch.`), run there by modelrecord.Ops, and what it recorded comes back as values: each record is
checked here (its op's name, its frames' lines within the student's file, tensors or plain values only) and
appended to the recorder as an `Op`, as if it had been recorded here. What the server says only locates: a forged
record can misplace the forger's own line, and the values it carries are the student's outputs anyway.

Submodules (`named_modules`, `named_children`) are described by the server (names, classes, own parameters'
shapes): RemoteSub objects stand for them (isinstance sees the torch class or the student's RemoteClass), called
through their root module. Child side.
"""
from __future__ import annotations

import torch

from ...recorder import Frame, Op, Recorder

class Memo(dict):
    """A cache of the prober's own: capture.py's tamper guard watches the grader's module-level dict/list/set,
    and these fill during a student's call (a failure's type, a callable's path, a submodule's stand-in class)."""


MAX_NAME = 80                   # characters of an op's name
TORCH_SPACES = (("torch.nn.functional", torch.nn.functional), ("torch.Tensor", torch.Tensor), ("torch", torch))
_PATHS: dict = Memo()      # a cache: it fills during a student's call (Memo)


def _path(fn) -> str | None:
    """The dotted path under `torch.` that names the callable fn (the server resolves it in its own torch)."""
    if id(fn) in _PATHS:
        return _PATHS[id(fn)]
    name = getattr(fn, "__name__", None)
    found = None
    if isinstance(name, str):
        for prefix, space in TORCH_SPACES:
            if getattr(space, name, None) is fn:
                found = f"{prefix}.{name}"
                break
    _PATHS[id(fn)] = found
    return found


def active(client) -> list:
    """The recorders on torch's mode stack that watch the student's file (client.code_path), not stopped."""
    path = getattr(client, "code_path", None)
    if not path:
        return []
    return [m for m in torch.overrides._get_current_function_mode_stack()
            if isinstance(m, Recorder) and not m.stopped and path in m.files and m.inputs != "identity"
            and len(m.ops) < m.limit]


def config(rec: Recorder) -> dict:
    """A recorder's options as the server takes them."""
    opt = lambda v: sorted(v) if v is not None else None    # noqa: E731
    return {"ops": None if rec.names is None else [[p, n] for fn, n in rec.names.items() if (p := _path(fn))],
            "only": opt(rec.only), "quiet": sorted(rec.quiet) if rec.names is None else [], "depth": rec.depth,
            "limit": rec.limit - len(rec.ops), "unplaced": sorted(rec.unplaced), "outputs": rec.outputs,
            "keep_out": opt(rec.keep_out), "all_tensors": rec.all_tensors, "inputs": rec.inputs,
            "keep_in": opt(rec.keep_in)}


def _plain(x, depth: int = 0):
    """A value as sent back: tensors, numbers, strings, None, short lists and tuples of them; else None."""
    if isinstance(x, torch.Tensor) or x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, (list, tuple)) and depth < 3:
        return type(x)(_plain(v, depth + 1) for v in x)
    return None


def merge(client, recs: list, answers) -> None:
    """Each recorder's records of one call (answers: a list per recorder), checked, appended as Ops."""
    if not isinstance(answers, list):
        return
    for rec, rows in zip(recs, answers):
        shown = rec.files.get(client.code_path)
        for r in rows if isinstance(rows, list) else ():
            if len(rec.ops) >= rec.limit:
                break
            op = _op(client, r, shown, len(rec.ops))
            if op is not None:
                rec.ops.append(op)


def _op(client, r, shown: str, index: int) -> Op | None:
    if not isinstance(r, dict) or not isinstance(r.get("op"), str) or len(r["op"]) > MAX_NAME:
        return None
    stack = []
    for f in r.get("stack") or ():
        if not (isinstance(f, list) and len(f) == 3 and all(type(v) is int for v in f)):
            return None
        line = client.line_in(client.code_rel, f[0])
        if line is None:
            return None                 # a line outside the student's file: not a record of it
        stack.append(Frame(shown, line, f[1], f[2] if 0 < f[2] <= line else line))
    op = Op(r["op"], stack[0].line if stack else None, index=index, stack=tuple(stack))
    outs, ins = r.get("outs"), r.get("ins")
    op.outs = [t for t in outs if isinstance(t, torch.Tensor)] if isinstance(outs, list) else []
    op.ins = [t for t in ins if isinstance(t, torch.Tensor)] if isinstance(ins, list) else []
    if isinstance(r.get("args"), (list, tuple)):
        op.args = tuple(_plain(a) for a in r["args"])
    if isinstance(r.get("kwargs"), dict):
        op.kwargs = {str(k): _plain(v) for k, v in r["kwargs"].items()}
    op.out = _plain(r.get("out"))
    return op


# -- submodules -------------------------------------------------------------------------------------------------
_STANDS: dict = Memo()      # a cache: it fills during a student's call (Memo)


def _stand_in(name: str, module: str) -> type:
    """A class named as the submodule's (type(m).__name__ reads as in process), for its RemoteSub."""
    key = (name, module)
    if key not in _STANDS:
        ok = name if name.isidentifier() else "Module"
        _STANDS[key] = type(ok, (RemoteSub,), {"__module__": "remote", "__qualname__": ok})
    return _STANDS[key]


def _torch_class(name: str, module: str):
    """torch's own class of that name in that module (only under `torch.`, only a module imported here: the
    server's word imports nothing), else None."""
    import sys
    mod = sys.modules.get(module) if module.startswith("torch.") and name.isidentifier() else None
    cls = getattr(mod, name, None)
    return cls if isinstance(cls, type) and issubclass(cls, torch.nn.Module) else None


class RemoteSub:
    """A submodule of a module built in the server: its name, its class, its own parameters' shapes; called
    alone through its root (RemoteModule.call_child)."""

    def __init__(self, root, name: str, cls, params: dict):
        self._root, self._name, self._cls, self._params, self._kids = root, name, cls, params, []

    @property
    def __class__(self):
        return self._cls if self._cls is not None else type(self)

    def __call__(self, *args, **kwargs):
        return self._root.call_child(self._name, *args, **kwargs) if self._name else self._root(*args, **kwargs)

    def named_children(self):
        return iter((k._name.rsplit(".", 1)[-1], k) for k in self._kids)

    def children(self):
        return iter(self._kids)

    def __iter__(self):             # a ModuleList's or Sequential's entries
        return iter(self._kids)

    def __len__(self):
        return len(self._kids)

    def modules(self):
        yield self
        for k in self._kids:
            yield from k.modules()

    def named_modules(self):
        return iter((m._name[len(self._name) + 1:] if self._name else m._name, m) for m in self.modules())


def submodules(module, rows, classes: dict) -> list:
    """RemoteSubs from the server's description (Server.modules), their tree linked: [(name, sub)], the root
    first (its name "")."""
    subs: dict = {}
    for row in rows if isinstance(rows, list) else ():
        if not (isinstance(row, list) and len(row) == 5 and isinstance(row[0], str) and isinstance(row[1], str)
                and isinstance(row[2], str) and isinstance(row[4], list)):
            continue
        name, cls_name, cls_mod, student, own = row
        if name in subs or (name and name.rsplit(".", 1)[0] not in subs and "." in name) or (name and "" not in subs):
            continue
        cls = classes.get(cls_name) if student is True else _torch_class(cls_name, cls_mod)
        params = {p[0]: tuple(p[1]) for p in own if isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
                  and isinstance(p[1], list) and all(type(s) is int and s >= 0 for s in p[1])}
        sub = _stand_in(cls_name, cls_mod)(module, name, cls, params)
        subs[name] = sub
        if name:
            subs[name.rsplit(".", 1)[0] if "." in name else ""]._kids.append(sub)
    return list(subs.items())
