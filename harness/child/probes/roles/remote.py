"""The prober's side of the model server (harness/child/modelserver.py, over child/modelwire.py): proxies that give the role probes what
they use of the student's objects, while the student's code runs in the server's process (issue 45).

`rctx.student` is a RemoteClass (a class whose call builds the piece in the server and returns a RemoteModule)
or a RemoteFunction (a method target: `__mtxdiag_owner__` is its class). A RemoteModule is called, trained,
evaluated, read (`state_dict`, `named_parameters`: copies) and written (`load_state_dict`) by request; what comes
back is values only, checked by the wire's reader (modelwire.read) and here: a line the server names must be in
the file's length, a message is cut, a record has the fields of its kind. What the server says is evidence: it
locates or explains, it never decides (the probes compare the values themselves). A float output that the server keeps a graph of comes back through `_Remote` (an autograd Function): a local
backward sends the gradient to the server, whose parameters then hold their gradients (`named_parameters`).
"""
from __future__ import annotations

import inspect
import time

import torch

from ... import modelwire as wire
from ..base import SEEDINGS
from . import remote_args, remote_ops
from .remote_ops import Memo

REQUEST_TIMEOUT_S = 60.0        # one request's answer (a forward of the course's small models takes ms)
KINDS = ("softmax", "dropout", "mask", "module", "sdpa", "child", "seen", "inputs")
MAX_NAME = 200                  # characters of a submodule name the server reports
MAX_MODES = 64                  # train()/eval() switches held for the next request (Client.modes)


class RemoteFailure(Exception):
    """The student's code raised in the server: its type's name, its message (cut), the student's line."""
    type_name = "Exception"

    def __init__(self, message: str, file: str | None = None, line: int | None = None):
        super().__init__(message)
        self.file, self.line = file, line


class ServerLost(RemoteFailure):
    """The server stopped answering, answered out of format or past its limits: the student's code's doing."""
    type_name = "ServerLost"


class Unsendable(Exception):
    """The prober asked for something the wire cannot carry (a probe's own fault, not the student's)."""


_TYPES: dict = Memo()      # a cache: it fills during a student's call (Memo)


def failure_type(name: str) -> type:
    """An exception class named as the student's was (so the check's text names it), under RemoteFailure."""
    name = name if isinstance(name, str) and name.isidentifier() and len(name) <= 60 else "Exception"
    if name not in _TYPES:
        _TYPES[name] = type(name, (RemoteFailure,), {"type_name": name})
    return _TYPES[name]


class Client:
    """One model server, over the descriptor `fd`; `lines`: each student file's length (relative path)."""

    def __init__(self, fd: int, lines: dict | None = None, timeout_s: float = REQUEST_TIMEOUT_S,
                 costs: dict | None = None):
        self.fd, self.lines, self.timeout_s = fd, dict(lines or {}), timeout_s
        self.lost: str | None = None
        self.seed = None
        self.seedings = SEEDINGS[0]     # base.manual_seed's calls when the seed was last sent
        self.recording: list = []       # [(kinds, records)] while observe.* watches a call
        self.seen = None                # the tensor a "seen" recording asks the server to look for
        self.sent = 0                   # the last request's id: the server echoes it (an alarm may cut a wait)
        # the round trips, counted where the result's timings are (bench/pack_split.py --breakdown reads them):
        # "server.<op>" requests, "server.<op>_s" seconds from sending each to reading its answer and
        # "server.<op>_work_s" the seconds the server says it spent on them (the rest: the wire and the wait)
        self.costs = costs if costs is not None else {}
        # train()/eval() of built modules, [handle, train], sent with the next request and applied in order before
        # it (a probe's mode switch needs no answer of its own: one round trip fewer each, issue 45's cost)
        self.modes: list = []
        # a one-file pack's (child/file_remote.py): the student's file as the prober's recorders name it, as the
        # server names it, and the student's classes by name (remote_ops: recorders and submodules over the wire)
        self.code_path: str | None = None
        self.code_rel: str | None = None
        self.classes: dict = {}

    def request(self, op: str, timeout_s: float | None = None, **kw) -> dict:
        t0 = time.perf_counter()
        try:
            return self._request(op, timeout_s, **kw)
        finally:
            n, s = f"server.{op}", f"server.{op}_s"
            self.costs[n] = self.costs.get(n, 0) + 1
            self.costs[s] = self.costs.get(s, 0.0) + time.perf_counter() - t0

    def _request(self, op: str, timeout_s: float | None = None, **kw) -> dict:
        if self.lost:
            raise ServerLost(f"the model server is gone: {self.lost}")
        seed = torch.initial_seed()
        if seed != self.seed or self.code_rel is not None and SEEDINGS[0] != self.seedings:
            kw["seed"], self.seed = seed, seed      # a one-file pack's: the same seed set again is sent again too
        self.seedings = SEEDINGS[0]
        self.sent += 1
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        modes, self.modes = self.modes, []
        if modes:
            kw["modes"] = modes
        try:
            try:
                wire.write(self.fd, dict(kw, op=op, id=self.sent))
            except wire.WireError as e:  # nothing was sent: the probe's own request cannot be carried
                self.modes = modes + self.modes
                raise Unsendable(f"a request the model server cannot be sent: {e}") from None
            except BaseException:       # cut while sending (an alarm): the stream is no longer in step
                self.lost = self.lost or f"a request ('{op}') was interrupted while it was sent"
                raise
            ans = wire.read(self.fd, deadline)
            while isinstance(ans, dict) and ans.get("id") != self.sent:    # a late answer to an interrupted request
                ans = wire.read(self.fd, deadline)
        except TimeoutError:
            self.lost = f"no answer to '{op}' within {timeout_s or self.timeout_s:.0f} s (the code hangs)"
        except (EOFError, OSError) as e:
            self.lost = f"it ended during '{op}' ({type(e).__name__}: {str(e)[:200]})"
        except (wire.WireError, ValueError, TypeError, RecursionError, OverflowError, RuntimeError) as e:
            self.lost = f"its answer to '{op}' was malformed: {str(e)[:200]}"
        else:
            if not isinstance(ans, dict):
                self.lost = f"its answer to '{op}' was not a message"
            elif isinstance(ans.get("error"), dict):
                err = ans["error"]
                file, line = self._place(err.get("file"), err.get("line"))
                raise failure_type(err.get("type"))(str(err.get("message"))[:1000], file, line)
            else:
                took = ans.get("took")      # the server's word, for the benches' timings only: a bounded number
                if type(took) is float and 0.0 <= took < 1e6:
                    self.costs[f"server.{op}_work_s"] = self.costs.get(f"server.{op}_work_s", 0.0) + took
                return ans
        raise ServerLost(f"the model server stopped: {self.lost}")

    def _place(self, file, line) -> tuple:
        """(file, line) when the file is the student's and the line within it; else (None, None)."""
        n = self.lines.get(file) if isinstance(file, str) else None
        return (file, line) if n and type(line) is int and 1 <= line <= n else (None, None)

    def line_in(self, file: str | None, line) -> int | None:
        return self._place(file, line)[1]


# -- the proxies -------------------------------------------------------------------------------------------------
class RemoteMeta(type):
    """A RemoteClass's type: calling the class builds the piece in the server, its generator seeded as the
    prober's is now (a build follows support.build's manual_seed: the same seed twice must give the same weights
    there as in process, so the seed goes with every build, not only when it changed)."""

    def __call__(cls, *args, **kwargs):
        cls._client.seed = None
        ans = cls._client.request("build", target=cls._component, args=tuple(args), kwargs=kwargs)
        h = ans.get("handle")
        if type(h) is not int:
            raise ServerLost("the model server answered a build without a handle")
        return RemoteModule(cls._client, h, cls)


def remote_class(client: Client, component: str, info: dict, shown: str | None, methods: bool = False) -> type:
    """The class standing for the student's class `info["owner"]` (its name, signature, file) in the server;
    `methods`: with `__init__` and `forward` carrying the student's signatures (a one-file pack's probes read them
    on the class)."""
    ps = remote_args.parameters(info)          # the student's, their plain defaults as the server read them
    if info.get("varkw") or not info.get("params"):
        ps.append(inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD))
    name = info.get("owner") if isinstance(info.get("owner"), str) and info["owner"].isidentifier() else "Remote"
    names = info.get("names")
    names = tuple(p for p in names if isinstance(p, str) and p.isidentifier() and len(p) <= 100) \
        if isinstance(names, list) and len(names) <= 64 else None
    ns = {"_client": client, "_component": component, "__mtxdiag_file__": shown, "__mtxdiag_params__": names,
          "_rel": info.get("file") if isinstance(info.get("file"), str) else None,
          "__signature__": inspect.Signature(ps), "__qualname__": name, "__module__": "submission"}
    if methods:
        self_ = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        ns["__init__"] = _stand_in_method("__init__", inspect.Signature([self_] + ps))
        fwd = info.get("forward")
        if isinstance(fwd, list) and len(fwd) <= 64:
            ns["forward"] = _stand_in_method("forward", _signature(fwd))
    return RemoteMeta(name, (), ns)


def _stand_in_method(name: str, sig):
    """A method of a RemoteClass that only carries the student's signature (the server runs the real one)."""
    def method(*args, **kwargs):
        raise TypeError(f"{name} runs in the model server")
    method.__name__ = method.__qualname__ = name
    method.__signature__ = sig
    return method


def _signature(rows: list):
    """[name, kind, has a default] per parameter (Server._resolve) as a Signature; None when malformed."""
    ps = []
    for r in rows:
        if not (isinstance(r, list) and len(r) == 3 and isinstance(r[0], str) and r[0].isidentifier()
                and type(r[1]) is int and 0 <= r[1] <= 4):
            return None
        ps.append(inspect.Parameter(r[0], inspect._ParameterKind(r[1]),
                                    default=None if r[2] is True else inspect.Parameter.empty))
    return inspect.Signature(ps, __validate_parameters__=False)


def call(client: Client, args, kwargs, child: str | None = None, **req):
    """One call in the server (a built module's method, or a function target: req["target"]), with the records the
    probe watches (observe.*'s kinds; the recorders active here: remote_ops), the arguments it changed in place
    copied back, a graph kept there made a local autograd node."""
    kinds = sorted({k for ks, _ in client.recording for k in ks})
    extra = {"child": child} if child is not None else {}
    if "seen" in kinds and isinstance(client.seen, torch.Tensor):
        extra["seen"] = client.seen
    recs = remote_ops.active(client)
    if recs:
        extra.update(watch=[remote_ops.config(r) for r in recs], file=client.code_rel)
    if not torch.is_grad_enabled():
        extra["grad"] = False       # as the probe runs: no graph kept there for a pass that cannot go back
    args, kwargs, handed = remote_args.send(client, args, kwargs)    # a module built there: by its handle
    ans = client.request("call", args=args, kwargs=kwargs, record=kinds, **extra, **req)
    for i, t in ans.get("mutated") or ():      # the student's forward changed an input in place: so here
        if type(i) is int and 0 <= i < len(args) and isinstance(args[i], torch.Tensor) and \
                isinstance(t, torch.Tensor) and t.shape == args[i].shape:
            with torch.no_grad():
                args[i].copy_(t)
    got = [r for r in ans.get("records") or () if isinstance(r, dict) and r.get("op") in KINDS and _valid(r)]
    for ks, out in client.recording:
        out.extend(r for r in got if r["op"] in ks or (r["op"] == "sdpa" and "dropout" in ks))
    if recs:
        remote_ops.merge(client, recs, ans.get("watched"))
    value = remote_args.returned(ans, handed)       # and the mode each module handed over was left in
    graph = ans.get("graph")
    if type(graph) is int:
        value = _with_graph(client, graph, value)
    return value


class RemoteCallable:
    """A function target (a one-file pack's `positional_encoding`): called in the server by its component."""

    def __init__(self, client: Client, component: str, shown: str | None):
        self._client, self._component, self.__mtxdiag_file__ = client, component, shown
        self.__name__ = self.__qualname__ = component

    def __call__(self, *args, **kwargs):
        return call(self._client, args, kwargs, target=self._component)


class RemoteFunction:
    """A method target (`Class.sample`): its class (`__mtxdiag_owner__`) is built, then the method called."""

    def __init__(self, owner: type, name: str, shown: str | None):
        self.__mtxdiag_owner__, self.__name__, self.__mtxdiag_file__ = owner, name, shown
        self.__qualname__ = f"{owner.__name__}.{name}"


class _Remote(torch.autograd.Function):
    """Outputs whose graph the server keeps: backward sends their gradients there."""

    @staticmethod
    def forward(ctx, client, graph, anchor, *outs):
        ctx.client, ctx.graph = client, graph
        return tuple(o.clone() for o in outs)

    @staticmethod
    def backward(ctx, *grads):
        ctx.client.request("backward", graph=ctx.graph, grads=list(grads))
        return (None, None, None) + tuple(None for _ in grads)


class RemoteModule:
    """A module built in the server: called and read by request."""
    __mtxdiag_remote__ = True       # what a probe outside roles/ asks (probes/block.py, structure.py)

    def __init__(self, client: Client, handle: int, cls: type):
        self._client, self._h, self._cls = client, handle, cls
        self.training = True
        self._tree: list | None = None      # its submodules (remote_ops.submodules), described once

    @property
    def __class__(self):            # type(m) stays RemoteModule; isinstance(m, cls) and file lookups see cls
        return self._cls

    def __call__(self, *args, **kwargs):
        return self._call("__call__", args, kwargs)

    def forward(self, *args, **kwargs):
        return self._call("forward", args, kwargs)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if hasattr(torch.nn.Module, name):     # torch's own API the proxy does not offer: the probe's limit, not
            raise AttributeError(f"the model server's proxy does not offer Module.{name}")    # the student's
        return lambda *args, **kwargs: self._call(name, args, kwargs)

    def _call(self, method: str, args, kwargs, child: str | None = None):
        return call(self._client, args, kwargs, handle=self._h, method=method, child=child)

    def named_modules(self):
        if self._tree is None:
            ans = self._client.request("modules", handle=self._h)
            self._tree = remote_ops.submodules(self, ans.get("modules"), self._client.classes)
        return iter([("", self)] + [(n, s) for n, s in self._tree if n])

    def modules(self):
        return iter(m for _, m in self.named_modules())

    def named_children(self):
        self.named_modules()
        root = next((s for n, s in self._tree or () if n == ""), None)
        return root.named_children() if root is not None else iter(())

    def children(self):
        return iter(m for _, m in self.named_children())

    def first_inputs(self, run) -> dict:
        """{submodule name: its first lone input of its output's shape} while run() calls this module."""
        return {r["name"]: r["value"] for r in records(self, run, ("inputs",))
                if isinstance(r.get("name"), str) and isinstance(r.get("value"), torch.Tensor)}

    def over(self, x, batched: bool, **kwargs):
        """The module on each entry of x's first axis (an unbatched module on a batch): vmap there, or one by one."""
        return call(self._client, (x,), kwargs, handle=self._h, method="__call__", over="vmap" if batched else "loop")

    def step(self, lr: float) -> None:
        """One Adam step (lr) of its parameters there, their gradients then cleared."""
        self._client.request("step", handle=self._h, lr=float(lr))

    def call_child(self, name: str, *args, **kwargs):
        """The submodule `name` (dotted, as named_modules names it) called alone, as student code."""
        return self._call("__call__", args, kwargs, child=str(name))

    def train(self, mode: bool = True):
        """Sent with the next request (Client.modes); the server applies it before that request, in order."""
        client = self._client
        if client.lost:
            raise ServerLost(f"the model server is gone: {client.lost}")
        client.modes.append([self._h, bool(mode)])
        if len(client.modes) >= MAX_MODES:     # a probe that only switches: sent on their own now and then
            client.request("mode")
        self.training = bool(mode)
        return self

    def eval(self):
        return self.train(False)

    def to(self, *args, **kwargs):
        return self                 # the server runs on the CPU: the only device the prober asks for here

    def state_dict(self):
        ans = self._client.request("state_dict", handle=self._h)
        return {str(k): v for k, v in _pairs(ans.get("state"), 2) if isinstance(v, torch.Tensor)}

    def load_state_dict(self, state, strict: bool = True):
        try:
            self._client.request("load_state_dict", handle=self._h, state=[[k, v.detach()] for k, v in state.items()],
                                 strict=bool(strict))
        except ServerLost:
            raise
        except RemoteFailure as e:  # a mismatch, as torch raises it in process
            raise RuntimeError(str(e)) from None

    def named_parameters(self):
        ans = self._client.request("parameters", handle=self._h)
        out = []
        for k, p, g, rg in _pairs(ans.get("params"), 4):
            if not isinstance(p, torch.Tensor) or not p.is_floating_point():
                continue
            q = torch.nn.Parameter(p.clone(), requires_grad=bool(rg))
            q.grad = g if isinstance(g, torch.Tensor) and g.shape == p.shape else None
            out.append((str(k), q))
        return iter(out)

    def parameters(self):
        return iter(p for _, p in self.named_parameters())

    def zero_grad(self, set_to_none: bool = True) -> None:     # the module's own, run there
        self._call("zero_grad", (), {"set_to_none": bool(set_to_none)})

    def assign(self, values: dict) -> None:
        """Each named parameter's data replaced in the server by the value given (its shape kept)."""
        self._client.request("assign", handle=self._h, params=[[str(k), v.detach()] for k, v in values.items()])


def _valid(r: dict) -> bool:
    """A record has the fields of its kind: a child's name is a short string, its input and output tensors or
    None; the other kinds are checked where they are read (observe.py)."""
    if r["op"] == "child":
        return isinstance(r.get("name"), str) and len(r["name"]) <= MAX_NAME and all(
            r.get(k) is None or isinstance(r.get(k), torch.Tensor) for k in ("input", "output"))
    return True


def _pairs(rows, n: int) -> list:
    return [tuple(r) for r in rows or () if isinstance(r, (list, tuple)) and len(r) == n and isinstance(r[0], str)]


def _with_graph(client: Client, graph: int, value):
    """value's float tensors made to carry a local autograd node that sends their gradient to the server."""
    flat = list(value) if isinstance(value, (tuple, list)) else [value]
    idx = [i for i, t in enumerate(flat) if isinstance(t, torch.Tensor) and t.is_floating_point()]
    if not idx:
        return value
    anchor = torch.zeros((), requires_grad=True)
    made = _Remote.apply(client, graph, anchor, *[flat[i] for i in idx])
    for i, t in zip(idx, made):
        flat[i] = t
    return type(value)(flat) if isinstance(value, (tuple, list)) else flat[0]


def parameter_names(cls) -> list | None:
    """The student's constructor's parameter names as the server read them (its *args and **kwargs included);
    None when it could not (as inspect.signature failing in process)."""
    names = getattr(cls, "__mtxdiag_params__", None)
    return list(names) if names is not None else None


def is_remote(obj) -> bool:
    return isinstance(obj, RemoteModule) or isinstance(type(obj), RemoteMeta)


def file_rel(module) -> str | None:
    """The module's class's file, relative to the submission's root (the server's name for it)."""
    return getattr(module.__class__, "_rel", None)


def records(module, call, kinds: tuple, seen=None) -> list:
    """The server's records of `kinds` made while `call()` runs (module: a RemoteModule); `seen`: the tensor a
    "seen" record is made for."""
    client = object.__getattribute__(module, "_client")
    out: list = []
    client.recording.append((kinds, out))
    before, client.seen = client.seen, seen if seen is not None else client.seen
    try:
        call()
    finally:
        client.recording.pop()
        client.seen = before
    return out


def trace(module, call) -> list:
    """The direct submodules in the order the module's forward calls them: [name, input copy, output copy]."""
    return [[r["name"], r.get("input"), r.get("output")] for r in records(module, call, ("child",))]


def received_mask(module, mask, call) -> bool:
    """Whether any submodule was handed a tensor equal to `mask` during `call()`."""
    return any(r["op"] == "seen" for r in records(module, call, ("seen",), seen=mask.detach()))
