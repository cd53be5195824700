"""Integrity of the probes against the code they measure.

A submission runs in the same Python process as the probes, so it can replace
what the probes rely on: `torch.allclose = lambda *a, **k: True`,
`builtins.isinstance = ...`, `torch.Tensor.abs = ...`, a TorchFunctionMode
pushed at import time, a global forward hook, an edit of the harness's own
modules. Two defences live here:

* In the child: `capture()` records, before any student code runs, the
  identity of every function, method and class attribute the probes and the
  interceptor use (torch, torch.nn.functional, Tensor and nn classes, optim,
  builtins, math, json, copy, inspect, the harness's and the reference's own
  modules, sys.modules), plus the global state they assume (no active torch
  function/dispatch mode, no global module or optimizer hooks, no trace or
  profile hook, default dtype/device, grad mode). `Guard.check(...)` compares
  against that record after loading, after every call into student code and
  after every probe; whatever changed is put back before the probes continue,
  and its names are kept: tampering is itself a finding (check `tamper`).

* In the parent: `scan_source()` reads the submission's text (never runs it)
  and names constructs that reach into the grader's process: importing the
  harness or the reference solution, frame and gc introspection, ctypes, raw
  file-descriptor calls, assignments to attributes of torch/builtins/math,
  `__torch_function__` overrides, dynamic code (eval/exec/__import__). The
  child cannot suppress this finding (check `tamper-static`).

Residual risk, stated plainly: a submission written specifically against
mtxdiag can, in principle, find and edit this module's record in memory.
That needs deliberate, harness-specific code, which the static scan is there
to catch; and a forged result can only ever change that student's own row.

This module imports torch only inside capture(): the parent imports it for
scan_source() without paying for torch.
"""
from __future__ import annotations

import ast
import builtins
import sys
import types

MISSING = object()
GRADER_PREFIXES = ("harness", "reference_model", "mutants", "mtxdiag")
# What a probe uses right after a call into student code: compared after every such call.
_HOT = ("builtins", "math", "torch.nn.functional", "torch.Tensor", "torch.nn.Module", "harness", "reference_model")




def _is_hot(label: str) -> bool:
    return label == "torch" or label.startswith(_HOT)


# Library modules whose callables the probes, the interceptor or the reference use.
_LIBRARY_MODULES = (
    "builtins", "math", "json", "json.encoder", "copy", "inspect", "time", "signal", "os", "sys", "operator",
    "functools", "contextlib", "dataclasses", "faulthandler", "random", "collections",
    "torch", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.nn.modules.module", "torch.nn.parameter",
    "torch.overrides", "torch.autograd", "torch.autograd.grad_mode", "torch.optim", "torch.optim.optimizer",
    "torch.optim.lr_scheduler", "torch.random", "torch.linalg", "torch.testing", "torch.functional",
    "torch._tensor", "torch._C", "torch._C._nn", "numpy",
)
# Classes whose attributes are watched too (added attributes count: they shadow inherited methods).
_LIBRARY_CLASS_MODULES = ("torch.nn", "torch.optim", "torch.optim.lr_scheduler")
_WATCHED_CLASSES = ("torch.Tensor", "torch.nn.Parameter", "torch.nn.Module", "torch.optim.Optimizer",
                    "torch.no_grad", "torch.enable_grad", "torch.set_grad_enabled", "torch.inference_mode",
                    "torch.overrides.TorchFunctionMode", "torch.autograd.Function")
_HOOK_DICTS = (
    ("torch.nn.modules.module", ("_global_backward_hooks", "_global_backward_pre_hooks",
                                 "_global_forward_hooks", "_global_forward_hooks_always_called",
                                 "_global_forward_hooks_with_kwargs", "_global_forward_pre_hooks",
                                 "_global_module_registration_hooks", "_global_parameter_registration_hooks",
                                 "_global_buffer_registration_hooks")),
    ("torch.optim.optimizer", ("_global_optimizer_pre_hooks", "_global_optimizer_post_hooks")),
)


class EditSites:
    """Where the student's text touches attributes of torch, builtins or the grader (line of first use)."""

    def __init__(self):
        self.assigned = {}     # attribute name -> line of an assignment/setattr/delattr/del of it
        self.full = {}         # "torch.Tensor.softmax" -> line, when the target's module is known
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
                        mark(sites.assigned, e.attr, node.lineno)
                        mark(sites.full, _full(e, aliases), node.lineno)
                    elif isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Constant) and \
                            namespace(e.value):
                        mark(sites.assigned, e.slice.value, node.lineno)
        elif isinstance(node, ast.Call) and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
            first = node.args[0]
            if name in ("setattr", "delattr", "__setattr__", "__delattr__") and \
                    (protected(first) or not isinstance(first, ast.Name)) or name == "__setitem__" and namespace(first):
                mark(sites.assigned, node.args[1].value, node.lineno)
                base = _full(first, aliases)
                if base and isinstance(node.args[1].value, str):
                    mark(sites.full, f"{base}.{node.args[1].value}", node.lineno)
    return sites


def _is_grader_name(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in GRADER_PREFIXES) or name == "__main__"


def _fn_parts(v):
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


def _parts_equal(a, b) -> bool:
    """Identity comparison only: `==` could run student code (a default's __eq__)."""
    if a[0] is not b[0] or a[1] is not b[1] or a[2] is not b[2] or len(a[4]) != len(b[4]):
        return False
    if (a[3] is None) != (b[3] is None) or a[3] is not None and (
            len(a[3]) != len(b[3]) or any(x[0] != y[0] or x[1] is not y[1] for x, y in zip(a[3], b[3]))):
        return False
    return all(x is y for x, y in zip(a[4], b[4]))


def _code_of(v):
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


def _always_student(label: str) -> bool:
    """Torch never changes builtins or the grader: any change there is the submission's."""
    return label.startswith("builtins") or _is_grader_name(label.split(".", 1)[0]) or label.startswith("harness")


def _cell_full(c) -> bool:
    try:
        c.cell_contents
        return True
    except ValueError:
        return False


def _same_container(a, b) -> bool:
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
        code = _code_of(value)
        if code is None:
            return ("data" if value is None or type(value) in (bool, int, float, str) else "other"), None
        fn = code.co_filename
        if self.student_path and fn == self.student_path:
            return "student", code.co_firstlineno
        if self._torch["dir"] and fn.startswith(self._torch["dir"]):
            return "torch", None
        return "other", None

    def blame(self, name: str, new, kind: str, label: str = "") -> tuple[bool, int | None]:
        """Was this change of a library attribute the student's doing, and on which line?

        The student's: their text assigns, sets or deletes that attribute (the line of the statement), or
        the new value is code written in their file (its line), or neither torch nor the data of a flag.
        torch's own: a function from torch's files put in place by torch (Optimizer.step's profiling wrapper,
        dynamo's Module.__init__ and manual_seed wrappers), or a flag it adds (`___needs_generation_tag_patch`).
        """
        line = self.sites.full.get(f"{label}.{name}", self.sites.assigned.get(name))
        origin, def_line = self._origin(new) if kind != "deleted" else ("other", None)
        if line is not None:
            return True, line
        if origin == "student":
            return True, def_line
        legit = origin == "torch" or (kind == "added" and origin == "data")
        return (not legit), self.sites.referenced.get(name)

    # -- comparison and restoration -----------------------------------------
    def freeze(self):
        """Precompute identity tuples so that a check costs milliseconds (it runs after every student call)."""
        from operator import itemgetter
        groups = {}
        for i, (label, owner, name, value, parts, is_class) in enumerate(self.attrs):
            groups.setdefault(id(owner), (owner, []))[1].append(i)
        self._groups, self._hot = [], []
        for owner, idx in groups.values():
            names = tuple(self.attrs[i][2] for i in idx)
            grp = (owner, idx, itemgetter(*names) if len(names) > 1 else (lambda d, n=names[0]: (d[n],)),
                   tuple(id(self.attrs[i][3]) for i in idx))
            self._groups.append(grp)
            if _is_hot(self.attrs[idx[0]][0]):
                self._hot.append(grp)
        self._bdict = builtins.__dict__
        self._bsaved = [(a[2], a[3]) for a in self.attrs if a[1] is builtins]
        self._funcs = [a[3] for a in self.attrs if a[4] is not None]
        self._func_ids = self._func_state(self._funcs)
        self._hot_funcs = [a[3] for a in self.attrs if a[4] is not None and _is_hot(a[0])]
        self._hot_func_ids = self._func_state(self._hot_funcs)
        self._class_lens = [(cls, len(keys)) for _, cls, keys in self.added_watch]
        self._cont_ids = [self._container_ids(obj) for _, obj, _ in self.containers]
        self._obj_ids = [self._container_ids(getattr(obj, "__dict__", {})) for _, obj, _ in self.objects]
        self._sysmods = sys.modules          # the interpreter's own dict, even if sys.modules is rebound
        self._mod_names = tuple(self.modules)
        self._mod_get = itemgetter(*self._mod_names)
        self._mod_ids = tuple(map(id, self.modules.values()))

    @staticmethod
    def _func_state(fs):
        return (tuple(id(f.__code__) for f in fs), tuple(id(f.__defaults__) for f in fs),
                tuple(id(f.__kwdefaults__) for f in fs),
                tuple(id(c.cell_contents) if _cell_full(c) else 0 for f in fs for c in (f.__closure__ or ())))

    @staticmethod
    def _container_ids(obj):
        if isinstance(obj, dict):
            return (type(obj), tuple(obj), tuple(map(id, obj.values())))
        if isinstance(obj, (set, frozenset)):
            return (type(obj), frozenset(map(id, obj)), len(obj))
        return (type(obj), tuple(map(id, obj)))

    def _dirty(self, hot=False) -> set:
        """Which kinds of record differ from the originals (fast: identities compared in bulk)."""
        dirty = set()
        for owner, idx, get, ids in (self._hot if hot else self._groups):
            try:
                if tuple(map(id, get(owner.__dict__))) != ids:
                    dirty.add("attrs")
                    break
            except KeyError:
                dirty.add("attrs")
                break
        if "attrs" not in dirty and (self._func_state(self._hot_funcs) != self._hot_func_ids if hot
                                     else self._func_state(self._funcs) != self._func_ids):
            dirty.add("attrs")
        if any(len(cls.__dict__) != n for cls, n in self._class_lens):
            dirty.add("classes")
        if any(self._container_ids(obj) != ids for (_, obj, _), ids in zip(self.containers, self._cont_ids)):
            dirty.add("containers")
        if any(self._container_ids(getattr(obj, "__dict__", {})) != ids
               for (_, obj, _), ids in zip(self.objects, self._obj_ids)):
            dirty.add("objects")
        if hot:
            return dirty
        try:
            if tuple(map(id, self._mod_get(self._sysmods))) != self._mod_ids:
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
        if "attrs" in dirty:
            self._check_attrs(where)
        if "classes" in dirty:
            refreeze = False
            for j, (label, cls, keys) in enumerate(self.added_watch):
                for name in sorted(set(cls.__dict__) - keys):
                    new = cls.__dict__.get(name)
                    mine, line = (True, self._line_of(name, new, label)) if _always_student(label) else \
                        self.blame(name, new, "added", label)
                    if not mine:      # e.g. AdamW.step: Optimizer wraps the inherited step for its hooks
                        keys = keys | {name}
                        self.added_watch[j] = (label, cls, keys)
                        self.accepted.append(f"{label}.{name}")
                        refreeze = True
                        continue
                    self._found(f"{label}.{name} added", where, line)
                    try:
                        delattr(cls, name)
                    except Exception:
                        pass
            if refreeze:
                self.freeze()
        if "containers" in dirty:
            for label, obj, saved in self.containers:
                if not _same_container(saved, obj):
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
                if not _same_container(saved, cur):
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
                    self._found(f"sys.modules[{name!r}] replaced", where,
                                self._line_of(name, mods.get(name)) or self.sites.referenced.get("modules"))
                    mods[name] = mod
        self._check_global_state(where, token)
        return self.findings[before:]

    def _check_attrs(self, where):
        refreeze = False
        for i, (label, owner, name, value, parts, is_class) in enumerate(self.attrs):
            cur = owner.__dict__.get(name, MISSING)
            if cur is not value:
                kind = "replaced" if cur is not MISSING else "deleted"
                if _always_student(label):
                    mine, line = True, self._line_of(name, cur, label)
                else:
                    mine, line = self.blame(name, cur, kind, label)
                if not mine:
                    # torch changes some of its own functions lazily (Optimizer.step for profiling hooks,
                    # torch.manual_seed and nn.Module.__init__ when dynamo loads): part of using torch.
                    self.attrs[i] = (label, owner, name, cur, _fn_parts(cur) if isinstance(
                        cur, types.FunctionType) else None, is_class)
                    self.accepted.append(f"{label}.{name}")
                    refreeze = True
                    continue
                self._found(f"{label}.{name} {kind}", where, line)
                try:
                    setattr(owner, name, value)
                except Exception:
                    pass
            elif parts is not None and not _parts_equal(_fn_parts(cur), parts):
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
        if refreeze:
            self.freeze()

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
        for name, get, put, key in (("settrace", sys.gettrace, sys.settrace, "trace"),
                                    ("setprofile", sys.getprofile, sys.setprofile, "profile")):
            cur = get()
            if cur is not base[key]:
                origin, line = self._origin(cur)
                if origin != "torch":
                    self._found(f"sys.{name} hook installed", where, line)
                put(base[key])

    # -- scopes around student code -------------------------------------------
    def enter(self):
        """The state before a call into student code (the harness may have its own modes/hooks active)."""
        t = self._torch
        return {"function_modes": t["tf_len"](), "dispatch_modes": t["td_len"](),
                "hooks": {label: frozenset(d) for label, d in self.hooks},
                "trace": sys.gettrace(), "profile": sys.getprofile()}

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
                if isinstance(m, str) and _is_grader_name(m):
                    found.append(f"{name} is the module {m}")
                continue
            if not isinstance(v, (type, types.FunctionType)):
                continue
            m = getattr(v, "__module__", None)
            if isinstance(m, str) and _is_grader_name(m):
                found.append(f"{name} is {m}.{getattr(v, '__qualname__', name)}")
            elif isinstance(v, type):
                for base in v.__mro__[1:]:
                    bm = getattr(base, "__module__", None)
                    if isinstance(bm, str) and _is_grader_name(bm):
                        found.append(f"{name} derives from {bm}.{base.__qualname__}")
                        break
        for f in found:
            self._found(f"uses the grader's own code: {f}", None,
                        self.sites.imported.get(f.split(" ", 1)[0]) or self.sites.referenced.get(f.split(" ", 1)[0]))
        return found


def _resolve(dotted: str):
    mod, _, attr = dotted.rpartition(".")
    m = sys.modules.get(mod)
    return getattr(m, attr, None) if m is not None else None


def capture(extra_objects=()) -> Guard:
    """Record the originals. Call after the harness and torch are imported, before any student code."""
    import warnings

    import torch
    import torch.nn  # noqa: F401
    import torch.nn.functional  # noqa: F401
    import torch.optim.lr_scheduler  # noqa: F401
    import torch.testing  # noqa: F401

    g = Guard()
    seen_owner = set()

    def watch_namespace(label, owner, callables_only, is_class):
        if id(owner) in seen_owner:
            return
        seen_owner.add(id(owner))
        try:
            items = list(owner.__dict__.items())
        except Exception:
            return
        for name, v in items:
            if callables_only and not (callable(v) or isinstance(v, (staticmethod, classmethod, property))):
                continue
            parts = _fn_parts(v) if isinstance(v, types.FunctionType) else None
            g.attrs.append((label, owner, name, v, parts, is_class))

    def watch_class(label, cls):
        if not isinstance(cls, type) or not (cls.__flags__ & (1 << 9)):  # heap types only: others are immutable
            return
        if id(cls) in seen_owner:
            return
        watch_namespace(label, cls, False, True)
        g.added_watch.append((label, cls, frozenset(cls.__dict__)))

    for name in _LIBRARY_MODULES:
        mod = sys.modules.get(name)
        if mod is not None:
            watch_namespace(name, mod, True, False)
    for dotted in _WATCHED_CLASSES:
        cls = _resolve(dotted)
        if cls is not None:
            watch_class(dotted, cls)
    for name in _LIBRARY_CLASS_MODULES:
        mod = sys.modules.get(name)
        for k, v in (vars(mod).items() if mod else ()):
            if isinstance(v, type) and isinstance(getattr(v, "__module__", None), str) and \
                    v.__module__.startswith("torch"):
                watch_class(f"{name}.{k}", v)
    # The grader's own modules: every attribute, their classes, their containers.
    for name, mod in list(sys.modules.items()):
        if not isinstance(mod, types.ModuleType) or not _is_grader_name(name):
            continue
        label = "harness.child" if name == "__main__" else name
        watch_namespace(label, mod, False, False)
        for k, v in list(vars(mod).items()):
            if isinstance(v, type) and getattr(v, "__module__", None) == mod.__name__:
                watch_class(f"{label}.{k}", v)
            elif type(v) in (dict, list, set):
                g.containers.append((f"{label}.{k}", v, type(v)(v) if not isinstance(v, dict) else dict(v)))
            elif type(v) is tuple:
                for i, item in enumerate(v):
                    if hasattr(item, "__dict__") and type(item).__module__ and _is_grader_name(type(item).__module__):
                        g.objects.append((f"{label}.{k}[{i}]", item, dict(vars(item))))
    for label, obj in extra_objects:
        g.objects.append((label, obj, dict(vars(obj))))
    g.modules = {k: v for k, v in sys.modules.items() if isinstance(v, types.ModuleType)}
    for modname, names in _HOOK_DICTS:
        mod = sys.modules.get(modname)
        for n in names:
            d = getattr(mod, n, None)
            if isinstance(d, dict):
                g.hooks.append((f"{modname}.{n}", d))
    import os
    g._torch = {"dir": os.path.dirname(torch.__file__) + os.sep,
                "tf_len": torch._C._len_torch_function_stack, "td_len": torch._C._len_torch_dispatch_stack,
                "tf_pop": torch._C._pop_torch_function_stack, "td_pop": torch._C._pop_torch_dispatch_stack,
                "get_device": getattr(torch, "get_default_device", lambda: None),
                "set_device": getattr(torch, "set_default_device", lambda d: None)}
    g.state = {
        "function_modes": torch._C._len_torch_function_stack(),
        "dispatch_modes": torch._C._len_torch_dispatch_stack(),
        "hooks": {label: frozenset(d) for label, d in g.hooks},
        "trace": sys.gettrace(), "profile": sys.getprofile(),
        "dtype": torch.get_default_dtype(),
        "device": torch.get_default_device() if hasattr(torch, "get_default_device") else None,
        "grad": torch.is_grad_enabled(), "threads": torch.get_num_threads(),
        "anomaly": torch.is_anomaly_enabled(), "deterministic": torch.are_deterministic_algorithms_enabled(),
        "warnings": list(warnings.filters), "recursion": sys.getrecursionlimit(),
    }
    g.freeze()
    return g


def bad_tensor(t, device: str) -> str | None:
    """Why a model output cannot be measured at all (a Tensor subclass, another device, not floating point)."""
    import torch
    kind = type(t)
    if kind is not torch.Tensor:
        if isinstance(t, torch.Tensor):
            return (f"forward returned a {kind.__name__} (a subclass of torch.Tensor); "
                    "return a plain torch.Tensor of logits")
        return None
    with torch._C.DisableTorchFunctionSubclass():
        dev = t.device
        if dev.type != torch.device(device).type:
            return f"forward returned a tensor on device '{dev}', expected '{device}'"
        if t.layout != torch.strided:
            return f"forward returned a {t.layout} tensor; return a dense tensor of logits"
        if not t.is_floating_point():
            return f"forward returned a tensor of dtype {t.dtype}; logits must be floating point"
    return None


# ---------------------------------------------------------------------------
# Parent side: a static scan of the submission's text (never executed here).
# ---------------------------------------------------------------------------

_PROTECTED_ROOTS = ("torch", "builtins", "math", "json", "numpy", "harness", "reference_model", "mtxdiag")
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
_DYNAMIC_CALLS = {"eval": "dynamic code (eval)", "exec": "dynamic code (exec)", "compile": "dynamic code (compile)",
                  "__import__": "dynamic import (__import__)", "import_module": "dynamic import (import_module)"}
MAX_SCAN_CHARS = 2_000_000


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
    if not isinstance(text, str) or len(text) > MAX_SCAN_CHARS:
        return []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return []
    aliases = {}   # local name -> full module path, from the file's imports
    found = []

    def flag(node, what):
        found.append({"line": getattr(node, "lineno", None), "what": what})

    try:
        nodes = list(ast.walk(tree))
    except RecursionError:
        return []
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                root = a.name.split(".")[0]
                if root in _FORBIDDEN_IMPORTS:
                    flag(node, _FORBIDDEN_IMPORTS[root])
                aliases[a.asname or root] = a.name if a.asname else root
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            root = mod.split(".")[0]
            if root in _FORBIDDEN_IMPORTS and node.level == 0:
                flag(node, _FORBIDDEN_IMPORTS[root])
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
