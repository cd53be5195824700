"""Names the student's functions need from top-level code the loader skipped, evaluated on demand.

The loader runs definitions only, so `make_optimizer = functools.partial(torch.optim.Adam, lr=LR)` or
`logger = logging.getLogger("train")` is skipped (its value calls code). When a function of the student's then
raises NameError for such a name, the statement that binds it is evaluated in the module, in the sandboxed
child, if it is cheap and safe: an assignment whose calls only build objects (functools.partial, torch and
nn constructors, the student's own nn.Module classes, logging, and functions of the file that do nothing
else), with the names it reads available or themselves provided the same way. Training, file loads, plotting
and anything else leave the caller a reason (NotProvided), which the probe reports as `skip`: the student's
code is not blamed for the harness not running their script.

Torch-free and harness-agnostic: the reversal/block child (child.py) and the lm repository loader use it.
"""
from __future__ import annotations

import ast
import builtins
import re

from ..readable import cut
from .loader import SAFE_CALLS, _dotted, _reads, _walk_outside_lambdas, load_limit

SERVER_NAMES = "__mtxdiag_server_names__"     # a served module's ServerNames, in the prober's namespace module
EVAL_TIMEOUT_S = 5.0        # one statement that only builds objects: far under a second when it is what it seems
MAX_DEPTH = 4               # statements (and the student's functions) followed to find out whether one is safe

# Calls that build objects and start nothing. Prefixes end with "." (a namespace); the rest are exact names.
BUILDERS = {"functools.partial", "partial", "print", "logging.getLogger", "getLogger", "logging.Formatter",
            "logging.StreamHandler", "logging.NullHandler", "logging.basicConfig", "logging.Logger",
            "random.Random", "np.random.default_rng", "numpy.random.default_rng", "itertools.count",
            "collections.defaultdict", "collections.OrderedDict", "collections.Counter", "defaultdict",
            "OrderedDict", "Counter", "SimpleNamespace", "types.SimpleNamespace", "isinstance", "getattr",
            "hasattr", "type", "object", "super", "repr", "format", "sum", "any", "all", "map", "filter"}
BUILDER_PREFIXES = ("torch.", "nn.", "F.", "math.", "np.", "numpy.", "functools.", "operator.", "string.")
# ... except what reads or writes files, downloads, or sets process-wide state the checks rely on
REFUSED = {"torch.load", "torch.save", "torch.hub.load", "torch.jit.load", "torch.jit.save", "torch.set_num_threads",
           "torch.set_default_dtype", "torch.set_default_device", "torch.set_grad_enabled", "np.load",
           "np.loadtxt", "np.genfromtxt", "np.fromfile", "np.save", "np.savez", "numpy.load", "numpy.loadtxt",
           "np.memmap", "torch.from_file", "torch.use_deterministic_algorithms", "torch.set_printoptions"}
REFUSED_PREFIXES = ("torch.hub.", "torch.onnx.", "torch.distributed.", "torch.multiprocessing.",
                    "torch.utils.tensorboard.", "torch.cuda.set_", "torch.backends.")
# methods that build or convert the object they are called on (model.to(device), logger.setLevel(...))
METHODS = {"to", "cpu", "eval", "float", "double", "half", "parameters", "named_parameters", "modules",
           "children", "state_dict", "setLevel", "addHandler", "setFormatter", "getChild", "items", "keys",
           "values", "get", "copy", "format", "join", "split", "strip", "lower", "upper", "replace", "append"}


NOTE = "evaluated on demand: a function of yours needs a name this line binds"


class NotProvided(Exception):
    """The name is bound only by skipped code that is not safe to run here: `reason` says which and why."""

    def __init__(self, reason: str, line: int | None = None):
        super().__init__(reason)
        self.reason, self.line = reason, line


def missing_name(exc: BaseException) -> str | None:
    """The name of a NameError (UnboundLocalError excluded: that is the student's own function), raised here or
    in the model server (probes/roles/remote.py names its failure by the student's exception's type)."""
    remote = getattr(type(exc), "type_name", None) == "NameError"
    if not remote and (not isinstance(exc, NameError) or isinstance(exc, UnboundLocalError)):
        return None
    name = getattr(exc, "name", None)
    if isinstance(name, str) and name:
        return name
    m = re.search(r"name '(\w+)' is not defined", str(exc))
    return m.group(1) if m else None


class _Judge:
    """Decides, statically, whether a skipped statement only builds objects."""

    def __init__(self, namespace: dict, sources):
        self.ns = namespace
        self.defs: dict[str, ast.AST] = {}
        self.binders: dict[str, list] = {}      # name -> [(stmt, entry)] of skipped statements, in file order
        for src in sources:
            for stmt, entry in getattr(src, "deferred", []):
                for name in _assigned_names(stmt):
                    self.binders.setdefault(name, []).append((stmt, entry))
            try:
                tree = ast.parse(src.text)
            except SyntaxError:
                continue
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    self.defs[node.name] = node

    def call_ok(self, call: ast.Call, local: set, depth: int) -> str | None:
        """None when the call builds something; else why it may do more."""
        name = _dotted(call.func)
        if name in REFUSED or name.startswith(REFUSED_PREFIXES):
            return f"calls {name}() (reads or writes files, or changes process-wide settings)"
        if name in SAFE_CALLS or name in BUILDERS or name.startswith(BUILDER_PREFIXES):
            return None
        if isinstance(call.func, ast.Attribute) and call.func.attr in METHODS:
            return None      # model.to(device), logger.setLevel(...): the receiver was judged on its own
        base = name.split(".")[0]
        if isinstance(call.func, ast.Attribute) and base in local:
            return None      # a method of an object this function built itself
        if name in self.defs and depth < MAX_DEPTH:
            return self.def_ok(self.defs[name], depth + 1)
        return f"calls {name}()"

    def def_ok(self, node, depth: int) -> str | None:
        """A class of the file: an nn.Module (a torch object) or one whose __init__ only builds; a function: its
        body only builds."""
        if isinstance(node, ast.ClassDef):
            if any(self._module_base(b, depth) for b in node.bases):
                return None
            init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
            return None if init is None else self.body_ok(init, depth)
        return self.body_ok(node, depth)

    def _module_base(self, base: ast.AST, depth: int) -> bool:
        name = _dotted(base)
        if name in ("nn.Module", "torch.nn.Module", "Module") or name.startswith(("nn.", "torch.nn.")):
            return True
        node = self.defs.get(name)
        return isinstance(node, ast.ClassDef) and depth < MAX_DEPTH and \
            any(self._module_base(b, depth + 1) for b in node.bases)

    def body_ok(self, fn: ast.FunctionDef, depth: int) -> str | None:
        local = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
        local |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        for sub in ast.walk(fn):
            if isinstance(sub, (ast.For, ast.While, ast.Global, ast.Nonlocal, ast.Yield, ast.YieldFrom, ast.Await)):
                kind = "loop" if isinstance(sub, (ast.For, ast.While)) else type(sub).__name__.lower()
                return f"{fn.name}() has a {kind} (more than building objects: training is not run)"
            if isinstance(sub, ast.Call):
                why = self.call_ok(sub, local, depth)
                if why:
                    return f"{fn.name}() {why}"
        return None

    def stmt_ok(self, stmt: ast.stmt) -> str | None:
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or stmt.value is None:
            return f"a top-level {type(stmt).__name__.lower()} statement (only assignments are evaluated)"
        for sub in _walk_outside_lambdas(stmt.value):
            if isinstance(sub, (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
                return "an expression with side effects"
            if isinstance(sub, ast.Call):
                why = self.call_ok(sub, set(), 0)
                if why:
                    return why
        return None


def _assigned_names(stmt: ast.stmt) -> set[str]:
    """Names an assignment binds as a whole value (x = ..., a, b = ..., x: T = ...); other statements count too,
    so that a name a loop or a with binds is found (and refused) rather than reported as undefined."""
    out = set()
    for n in ast.walk(stmt):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            out.add(n.name)
    return out


def provide(namespace: dict, sources, name: str, code_path: str | None = None) -> list[dict] | None:
    """Evaluate the skipped statement that binds `name` (and what it needs), in `namespace`.

    Returns the skipped entries evaluated (each marked `evaluated_on_demand`), None when no skipped statement
    binds the name (a real NameError of the student's), or raises NotProvided with the reason."""
    sources = sources if isinstance(sources, (list, tuple)) else [sources]
    judge = _Judge(namespace, sources)
    done: list[dict] = []
    _provide(judge, name, code_path or getattr(sources[0], "code_path", "<submission>"), done, set(), 0)
    return done or None


def _provide(judge: _Judge, name: str, path: str, done: list, seen: set, depth: int) -> None:
    binders = judge.binders.get(name)
    if not binders:
        return
    # The last binding that only builds objects: `model = MiniTransformer()` rather than a later
    # `model = train(model)`, which a function called by that training sees the first value of anyway.
    # (`model = model.to(device)` reads its own earlier value: the binding before it is used instead)
    judged = [(stmt, entry, judge.stmt_ok(stmt)) for stmt, entry in binders]
    stmt, entry, why = next((b for b in reversed(judged) if b[2] is None and name not in _reads(b[0])),
                            judged[-1])
    line = entry.get("line")
    if name in seen or depth > MAX_DEPTH:
        raise NotProvided(f"`{name}` (line {line}) depends on itself or on too long a chain of skipped code", line)
    seen.add(name)
    if why:
        raise NotProvided(f"`{name}` is defined at line {line} by top-level code the harness does not run: "
                          f"{why}", line)
    for dep in sorted(_reads(stmt)):
        if dep in judge.ns or hasattr(builtins, dep):
            continue
        if dep not in judge.binders:
            raise NotProvided(f"`{name}` (line {line}) needs `{dep}`, which nothing at the top level defines", line)
        _provide(judge, dep, path, done, seen, depth + 1)
    try:
        if hasattr(judge.ns, "run_statement"):      # the module lives in the model server: it runs it there
            judge.ns.run_statement(stmt, EVAL_TIMEOUT_S)
        else:
            with load_limit(EVAL_TIMEOUT_S):
                exec(compile(ast.Module(body=[stmt], type_ignores=[]), path, "exec"), judge.ns)
    except BaseException as e:     # noqa: BLE001 - the student's statement, reported, never raised into a probe
        raise NotProvided(f"`{name}` is defined at line {line} by top-level code the harness does not run; "
                          f"evaluating it raised {type(e).__name__}: {cut(e, 200)}", line)
    entry.update(evaluated_on_demand=True, note=NOTE)
    done.append(entry)


def _raising_module(exc: BaseException, sources: list):
    """(globals, [source]) of the innermost frame that raised, when it runs one of the sources' files: in a
    repository (lm) the name is missing from that module, not from the one the caller holds."""
    tb, frame = exc.__traceback__, None
    while tb is not None:
        frame, tb = tb.tb_frame, tb.tb_next
    by_path = {getattr(s, "code_path", None): s for s in sources}
    if frame is not None and frame.f_code.co_filename in by_path:
        return frame.f_globals, [by_path[frame.f_code.co_filename]]
    return None


def run_needing_names(fn, namespace: dict, sources, skip_exc, code_path: str | None = None, attempts: int = 6):
    """fn(); each NameError for a name only skipped code binds is provided and fn run again. A name that cannot
    be provided safely raises skip_exc(reason): the measurement could not be made, the student is not blamed.
    The name is provided in the module whose code raised (the innermost frame of one of `sources`' files), else
    in `namespace`. Returns (fn's result, the entries evaluated)."""
    done: list[dict] = []
    sources = sources if isinstance(sources, (list, tuple)) else [sources]
    for _ in range(attempts):
        try:
            return fn(), done
        except BaseException as e:
            exc = getattr(e, "exc", None) or e
            name = missing_name(exc)
            ns, srcs = _raising_module(exc, sources) or (namespace, sources)
            if name is None or name in ns:
                raise
            try:
                got = provide(ns, srcs, name, code_path)
            except NotProvided as why:
                where = getattr(e, "where", None)
                raise skip_exc(f"{where + ' needs' if where else 'needs'} a name from code the harness does "
                               f"not run: {why.reason}") from None
            if not got:
                raise
            done += got
    return fn(), done


def namespace(module) -> dict:
    """Where a module's missing names are provided: its own dict, or (a module in the model server) the names
    it has there, which runs what is provided (child/file_remote.ServerNames)."""
    return module.__dict__.get(SERVER_NAMES) or module.__dict__


def run_probe(fn, namespace: dict, sources, skip_exc) -> list:
    """A probe through run_needing_names; its checks list the skipped lines evaluated for it."""
    checks, provided = run_needing_names(fn, namespace, sources, skip_exc)
    if provided and isinstance(checks, list):
        for c in checks:
            if isinstance(c, dict):
                c.setdefault("data", {})["evaluated_on_demand"] = [
                    {"line": e.get("line"), "code": cut(e.get("code", ""), 200)} for e in provided]
    return checks


def mark(skipped: list[dict], checks: list[dict]) -> None:
    """Mark the skipped entries a probe evaluated (in this process or the side one) from its checks' data."""
    lines = {e.get("line") for c in checks for e in (c.get("data") or {}).get("evaluated_on_demand", [])
             if isinstance(e, dict)}
    for s in skipped:
        if s.get("line") in lines:
            s.update(evaluated_on_demand=True, note=NOTE)
