"""The child's guard: what the probes rely on, recorded before student code runs, checked after it.

A submission runs in the same Python process as the probes, so it can replace what the probes rely on:
`torch.allclose = lambda *a, **k: True`, `builtins.isinstance = ...`, `torch.Tensor.abs = ...`, a
TorchFunctionMode pushed at import time, an edit of the harness's own modules. `capture()` (capture.py)
records, before any student code runs, the identity of every function, method and class attribute the probes
and the interceptor use, plus the global state they assume. `Guard.check(...)` compares against that record
after loading, after every call into student code and after every probe; whatever the student's code
changed is put back and named, with the student's line, in the failing check `tamper`.

Only the student's own changes count. torch changes some of its own attributes when used legitimately (an
optimizer wraps `Optimizer.step`, dynamo patches `nn.Module.__init__` and wraps `manual_seed`); a new value
written in torch's files that the student's text does not assign is taken into the record
(`Guard.accepted`), not reported. Global settings and hooks (`register_module_forward_hook`,
`set_default_dtype`, `set_num_threads`) are reset after each call without a finding.
"""
from __future__ import annotations

import builtins
import gc
import sys
import types
from operator import is_

from ..identity import (
    MISSING,
    inherited,
    wraps,
    wrapped_chain,
    code_of,
    fn_parts,
    is_grader_name,
    parts_equal,
    same_container,
)
from ..scan import EditSites, edit_sites
from . import hookwatch

# What a probe uses right after a call into student code: compared after every such call.
_HOT = ("builtins", "math", "torch.nn.functional", "torch.Tensor", "torch.nn.Module", "harness", "reference_model")


def _is_hot(label: str) -> bool:
    return label == "torch" or label.startswith(_HOT)


def _always_student(label: str) -> bool:
    """Torch never changes builtins or the grader: any change there is the submission's."""
    return label.startswith("builtins") or is_grader_name(label.split(".", 1)[0]) or label.startswith("harness")


class Guard:
    """The record of what the probes rely on, taken before student code runs."""

    def __init__(self):
        self.attrs = []        # (label, namespace dict owner, name, value, fn_parts or None, is_class)
        self.added_watch = []  # (label, cls, frozenset of keys at capture)
        self.containers = []   # (label, obj, shallow copy)
        self.objects = []      # (label, obj, dict copy) - e.g. the frozen Probe records
        self.modules = {}      # sys.modules at capture (identity)
        self.hooks = []        # (label, dict)
        self.state = {}
        self.findings = []     # what was changed, in order, each once
        self.lines = []        # the student's line behind each finding (None when it cannot be told)
        self._seen = set()
        self.student_path = None   # the file name the student's frames carry
        self.sites = EditSites()
        self.accepted = []     # torch's own side effects taken into the record (not findings)
        self.module_changes = []   # (module name, line, during): sys.modules entries the student replaced
        self.audit = None          # audit.py's record: a hook handed frames is told to the parent at once

    def set_student(self, path: str, text: str):
        """The student's file: its frames' name, and where its text edits attributes (before it runs)."""
        self.student_path = path
        self.sites = edit_sites(text)

    # -- findings --------------------------------------------------------
    def _found(self, what: str, where: str | None = None, line: int | None = None):
        if what not in self._seen:
            self._seen.add(what)
            at = f" at line {line}" if line else ""
            self.findings.append(f"{what}{at}" if not where else f"{what}{at} (during {where})")
            self.lines.append(line)

    def _origin(self, value) -> tuple[str, int | None]:
        """Where a value's code was written: 'student' (with its line), 'torch', 'other' or 'data'."""
        code = code_of(value)
        if code is None:
            return ("data" if value is None or type(value) in (bool, int, float, str) else "other"), None
        fn = code.co_filename
        if self.student_path and fn == self.student_path:
            return "student", code.co_firstlineno
        if self._torch["dir"] and fn.startswith(self._torch["dir"]):
            return "torch", None
        return "other", None

    def blame(self, name: str, new, kind: str, label: str = "", old=MISSING) -> tuple[bool, int | None]:
        """Was this change of a library attribute the student's doing, and on which line?

        The student's: their text assigns, sets or deletes that attribute (the line of the statement), or
        the new value is code written in their file (its line), or anything but torch's own wrapper of the
        very object recorded (`old`; for an added attribute, the one it shadows) or the data of a flag.
        torch's own: a function from torch's files that wraps the recorded one (Optimizer.step's profiling
        wrapper, dynamo's manual_seed wrapper: `__wrapped__` or a closure cell), or a flag it adds
        (`___needs_generation_tag_patch`). Another torch function put in its place (torch.isfinite =
        torch._refs.isreal) is not torch's doing: defined in torch's files is not the object recorded.
        """
        line = self.sites.full.get(f"{label}.{name}", self.sites.assigned.get(name))
        origin, def_line = self._origin(new) if kind != "deleted" else ("other", None)
        if line is not None:
            return True, line
        if origin == "student":
            return True, def_line
        # torch's own: a replacement must wrap the exact object it replaces; an addition must wrap what it
        # shadows or what that wraps (torch.compile puts disable(Adam._init_group) on AdamW, and may wrap
        # Adam's own attribute after AdamW's, so the base's attribute is then a sibling wrapper of the same
        # function); a flag torch adds is data
        olds = wrapped_chain(old) if kind == "added" else [old]
        legit = (kind == "added" and origin == "data") or (origin == "torch" and old is not MISSING
                                                           and any(wraps(new, o) for o in olds))
        return (not legit), (None if legit else self.sites.referenced.get(name))

    # -- comparison and restoration -----------------------------------------
    def freeze(self):
        """Precompute snapshots so that a check costs a millisecond (it runs after every student call).

        The fast path compares identities with operator.is_ and reads functions through one
        gc.get_referents call: builtins.id and reading f.__code__ each raise an audit event, and the child's
        audit hook (audit.py) runs Python code for every event, so the obvious map(id, ...) over ~10,000
        objects cost ~10 ms a check there. A difference only sends the check to the exact comparison."""
        from operator import itemgetter
        groups = {}
        for i, (label, owner, name, value, parts, is_class) in enumerate(self.attrs):
            groups.setdefault(id(owner), (owner, []))[1].append(i)
        self._groups, self._hot = [], []
        for owner, idx in groups.values():
            names = tuple(self.attrs[i][2] for i in idx)
            grp = (owner, idx, itemgetter(*names) if len(names) > 1 else (lambda d, n=names[0]: (d[n],)),
                   tuple(self.attrs[i][3] for i in idx))
            self._groups.append(grp)
            if _is_hot(self.attrs[idx[0]][0]):
                self._hot.append(grp)
        self._bdict = builtins.__dict__
        self._bsaved = [(a[2], a[3]) for a in self.attrs if a[1] is builtins]
        self._funcs = _Functions([a[3] for a in self.attrs if a[4] is not None])
        self._hot_funcs = _Functions([a[3] for a in self.attrs if a[4] is not None and _is_hot(a[0])])
        self._class_lens = [(cls, len(keys)) for _, cls, keys in self.added_watch]
        # each distinct container once: every module's __builtins__ is the one builtins dict (5 of the 10)
        distinct = {id(obj): obj for _, obj, _ in self.containers}
        self._cont_snaps = [(obj, _snapshot(obj)) for obj in distinct.values()]
        self._obj_snaps = [_snapshot(getattr(obj, "__dict__", {})) for _, obj, _ in self.objects]
        self._sysmods = sys.modules          # the interpreter's own dict, even if sys.modules is rebound
        self._mod_names = tuple(self.modules)
        self._mod_get = itemgetter(*self._mod_names)
        self._mod_vals = tuple(self.modules.values())

    def _dirty(self, hot=False) -> set:
        """Which kinds of record differ from the originals (fast: identities compared in bulk)."""
        dirty = set()
        for owner, idx, get, vals in (self._hot if hot else self._groups):
            try:
                if not all(map(is_, get(owner.__dict__), vals)):
                    dirty.add("attrs")
                    break
            except KeyError:
                dirty.add("attrs")
                break
        if "attrs" not in dirty and (self._hot_funcs if hot else self._funcs).changed():
            dirty.add("attrs")
        if any(len(cls.__dict__) != n for cls, n in self._class_lens):
            dirty.add("classes")
        if any(not _same_snapshot(obj, snap) for obj, snap in self._cont_snaps):
            dirty.add("containers")
        if any(not _same_snapshot(getattr(obj, "__dict__", {}), snap)
               for (_, obj, _), snap in zip(self.objects, self._obj_snaps)):
            dirty.add("objects")
        if hot:
            return dirty
        try:
            if not all(map(is_, self._mod_get(self._sysmods), self._mod_vals)):
                dirty.add("modules")
        except KeyError:
            dirty.add("modules")
        return dirty

    def _restore_builtins(self, where=None):
        """First of all, with nothing but `is` and dict access: everything else here uses builtins."""
        d = self._bdict
        changed = []
        for name, value in self._bsaved:
            cur = d.get(name, MISSING)
            if cur is not value:
                d[name] = value
                changed.append((name, cur))
        for name, cur in changed:        # builtins are back: now the lines can be looked up
            self._found(f"builtins.{name} replaced", where, self._line_of(name, cur, "builtins"))

    def check(self, where: str | None = None, token=None, hot=False) -> list[str]:
        """Compare against the record, put back what changed, return what changed now.

        hot=True (after each call into student code) compares what a probe uses right after the call:
        torch, torch.nn.functional, Tensor, Module, builtins, math and the grader's modules (~1 ms);
        the full comparison (~10 ms) runs after loading and after every probe."""
        self._restore_builtins(where)
        before = len(self.findings)
        dirty = self._dirty(hot) if hasattr(self, "_groups") else {"attrs", "classes", "containers", "objects",
                                                                   "modules"}
        refreeze = self._check_attrs(where) if "attrs" in dirty else False
        if "classes" in dirty:
            for j, (label, cls, keys) in enumerate(self.added_watch):
                for name in sorted(set(cls.__dict__) - keys):
                    new = cls.__dict__.get(name)
                    mine, line = (True, self._line_of(name, new, label)) if _always_student(label) else \
                        self.blame(name, new, "added", label, inherited(cls, name))
                    if not mine:      # e.g. AdamW.step: Optimizer wraps the inherited step for its hooks
                        keys = keys | {name}
                        self.added_watch[j] = (label, cls, keys)
                        # watched from now on: the student replacing torch's wrapper later is theirs
                        self.attrs.append((label, cls, name, new, fn_parts(new) if isinstance(
                            new, types.FunctionType) else None, True))
                        self.accepted.append(f"{label}.{name}")
                        refreeze = True
                        continue
                    self._found(f"{label}.{name} added", where, line)
                    try:
                        delattr(cls, name)
                    except Exception:
                        pass
        if "containers" in dirty:
            for label, obj, saved in self.containers:
                if not same_container(saved, obj):
                    self._found(f"{label} modified", where, self._line_of(label.rsplit(".", 1)[-1], None))
                    try:
                        if isinstance(obj, (dict, set)):
                            obj.clear(), obj.update(saved)
                        elif isinstance(obj, list):
                            obj[:] = saved
                    except Exception:
                        pass
        if "objects" in dirty:
            for label, obj, saved in self.objects:
                cur = getattr(obj, "__dict__", {})
                if not same_container(saved, cur):
                    self._found(f"{label} modified", where, self._changed_line(saved, cur, label))
                    try:
                        for k in list(cur):
                            if k not in saved:
                                object.__delattr__(obj, k)
                        for k, v in saved.items():
                            object.__setattr__(obj, k, v)
                    except Exception:
                        pass
        if "modules" in dirty:
            mods = self._sysmods
            for name, mod in self.modules.items():
                if mods.get(name) is not mod:
                    line = self._line_of(name, mods.get(name)) or self.sites.referenced.get("modules")
                    self._found(f"sys.modules[{name!r}] replaced", where, line)
                    self.module_changes.append((name, line, where))
                    mods[name] = mod
        if (dirty and hasattr(self, "_groups")) or refreeze:
            # once: what the exact comparison put back, and torch's own changes taken into the record
            self.freeze()
        self._check_global_state(where, token)
        return self.findings[before:]

    def _check_attrs(self, where) -> bool:
        """The exact comparison of the attributes; True when torch's own changes were taken into the record
        (the caller snapshots the record again, once)."""
        refreeze = False
        for i, (label, owner, name, value, parts, is_class) in enumerate(self.attrs):
            cur = owner.__dict__.get(name, MISSING)
            if cur is not value:
                kind = "replaced" if cur is not MISSING else "deleted"
                if _always_student(label):
                    mine, line = True, self._line_of(name, cur, label)
                else:
                    mine, line = self.blame(name, cur, kind, label, value)
                if not mine:
                    # torch changes some of its own functions lazily (Optimizer.step for profiling hooks,
                    # torch.manual_seed and nn.Module.__init__ when dynamo loads): part of using torch.
                    self.attrs[i] = (label, owner, name, cur, fn_parts(cur) if isinstance(
                        cur, types.FunctionType) else None, is_class)
                    self.accepted.append(f"{label}.{name}")
                    refreeze = True
                    continue
                self._found(f"{label}.{name} {kind}", where, line)
                try:
                    setattr(owner, name, value)
                except Exception:
                    pass
            elif parts is not None and not parts_equal(fn_parts(cur), parts):
                line = next((self.sites.assigned[k] for k in ("__code__", "__defaults__", "__kwdefaults__",
                                                             "cell_contents") if k in self.sites.assigned), None)
                self._found(f"{label}.{name} rewritten (code, defaults or closure)", where, line)
                try:
                    cur.__code__, cur.__defaults__ = parts[0], parts[1]
                    cur.__kwdefaults__ = dict(parts[3]) if parts[3] is not None else None
                    for c, v in zip(cur.__closure__ or (), parts[4]):
                        if v is not MISSING:
                            c.cell_contents = v
                except Exception:
                    pass
        return refreeze

    def _line_of(self, name: str, new, label: str = "") -> int | None:
        """The student's line behind a change that only the student can have made (builtins, the grader)."""
        line = self.sites.full.get(f"{label}.{name}", self.sites.assigned.get(name))
        if line is None:
            origin, line = self._origin(new)
        return line if line is not None else self.sites.referenced.get(name)

    def _changed_line(self, saved: dict, cur: dict, label: str) -> int | None:
        for k in list(cur)[:200]:
            v = cur[k]
            if saved.get(k, MISSING) is not v:
                line = self._line_of(k, v)
                if line is not None:
                    return line
        return self.sites.referenced.get(label.split("[")[0].rsplit(".", 1)[-1])

    def _check_global_state(self, where, token):
        t = self._torch
        base = token or self.state
        self._reset_device()
        for kind, length, pop, key in (("TorchFunctionMode", t["tf_len"], t["tf_pop"], "function_modes"),
                                       ("TorchDispatchMode", t["td_len"], t["td_pop"], "dispatch_modes")):
            n = length()
            for _ in range(max(0, n - base[key])):
                try:
                    mode = pop()
                except Exception:
                    break
                # A mode of the student's own class left active is theirs; one of torch's is put away quietly.
                origin, line = self._origin(getattr(type(mode), "__torch_function__" if kind[5] == "F"
                                                    else "__torch_dispatch__", None))
                if origin != "torch":
                    self._found(f"a {kind} left active", where, line)
        for label, d in self.hooks:
            # register_module_forward_hook & co. are torch's API: removed after the call, not a finding.
            keys = base["hooks"].get(label, frozenset())
            for k in [k for k in list(d) if k not in keys]:
                d.pop(k, None)
        # trace, profile and signal hooks, threading's, the thread-start wrappers: hookwatch.py
        hookwatch.check(base.get("hookwatch"), self._origin, lambda what, line: self._found(what, where, line),
                        self.audit)

    # -- scopes around student code -------------------------------------------
    def enter(self):
        """The state before a call into student code (the harness may have its own modes/hooks active)."""
        t = self._torch
        return {"function_modes": t["tf_len"](), "dispatch_modes": t["td_len"](),
                "hooks": {label: frozenset(d) for label, d in self.hooks}, "hookwatch": hookwatch.snapshot()}

    def _reset_device(self):
        """torch.set_default_device works through a TorchFunctionMode: undo it through the same API."""
        t = self._torch
        saved = self.state.get("device")
        try:
            if saved is not None and t["get_device"]() != saved:
                t["set_device"](None if saved.type == "cpu" else saved)
        except Exception:
            pass

    def reset_state(self):
        """Put back global settings a submission may change legitimately or not (not a finding)."""
        import warnings

        import torch
        self._restore_builtins()
        s = self.state
        try:
            torch.set_default_dtype(s["dtype"])
            self._reset_device()
            torch.set_grad_enabled(s["grad"])
            torch.set_num_threads(s["threads"])
            if torch.is_anomaly_enabled() != s["anomaly"]:
                torch.set_anomaly_enabled(s["anomaly"])
            if torch.are_deterministic_algorithms_enabled() != s["deterministic"]:
                torch.use_deterministic_algorithms(s["deterministic"])
            warnings.filters[:] = s["warnings"]
            sys.setrecursionlimit(s["recursion"])
        except Exception:
            pass

    def grader_use(self, module) -> list[str]:
        """Names in the student's module that are the grader's own code (the reference solution, the harness)."""
        found = []
        for name, v in list(vars(module).items())[:5000]:
            if isinstance(v, types.ModuleType):
                m = getattr(v, "__name__", "")
                if isinstance(m, str) and is_grader_name(m):
                    found.append(f"{name} is the module {m}")
                continue
            if not isinstance(v, (type, types.FunctionType)):
                continue
            m = getattr(v, "__module__", None)
            if isinstance(m, str) and is_grader_name(m):
                found.append(f"{name} is {m}.{getattr(v, '__qualname__', name)}")
            elif isinstance(v, type):
                for base in v.__mro__[1:]:
                    bm = getattr(base, "__module__", None)
                    if isinstance(bm, str) and is_grader_name(bm):
                        found.append(f"{name} derives from {bm}.{base.__qualname__}")
                        break
        for f in found:
            self._found(f"uses the grader's own code: {f}", None,
                        self.sites.imported.get(f.split(" ", 1)[0]) or self.sites.referenced.get(f.split(" ", 1)[0]))
        return found


class _Functions:
    """Functions whose code, defaults, keyword defaults or closure contents a check compares: what each
    refers to, read with one gc.get_referents call (no audit event per function), plus the contents of
    their cells and keyword-default dicts (changed in place without touching the function)."""

    def __init__(self, fs: list):
        self.fs = fs
        self.cells = [c for f in fs for c in (f.__closure__ or ())]
        self.kwdefaults = [k for k in (f.__kwdefaults__ for f in fs) if k is not None]
        self.snap = self.state()

    def state(self) -> list:
        return gc.get_referents(*self.fs) + gc.get_referents(*self.cells) + gc.get_referents(*self.kwdefaults)

    def changed(self) -> bool:
        now = self.state()
        return len(now) != len(self.snap) or not all(map(is_, now, self.snap))


def _snapshot(obj):
    """A container as (type, its keys, its members by reference) for _same_snapshot."""
    if isinstance(obj, dict):
        return type(obj), tuple(obj), list(obj.values())
    return type(obj), None, list(obj)


def _same_snapshot(obj, snap) -> bool:
    """Same type, same keys, the very same members (an unchanged set iterates in the same order)."""
    t, keys, members = snap
    if type(obj) is not t or len(obj) != len(members):
        return False
    if keys is not None:
        return tuple(obj) == keys and all(map(is_, obj.values(), members))
    return all(map(is_, obj, members))
