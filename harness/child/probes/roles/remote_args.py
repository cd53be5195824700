"""What crosses to the model server beside tensors and plain values (issue 45, a one-file pack's probes): a module
built there handed to the student's own function by its handle (greedy_decode(model, src), train(model)), the
mode that function left it in and the module it returned, read back onto the prober's proxy; and the student's
signatures as the server read them (a parameter's plain default: the probes' `default`/`kwargs_for`). Everything
read here is the server's word: bounded, typed, never a verdict. Child side (roles/remote.py's helpers)."""
from __future__ import annotations

import inspect

from ... import modelwire as wire

MAX_TEXT = 200          # characters of a string default


def _proxy(x) -> bool:
    """A module built in the server (roles/remote.RemoteModule: its type says so; type() is not its __class__)."""
    return getattr(type(x), "__mtxdiag_remote__", False) is True


def send(client, args, kwargs) -> tuple:
    """(args, kwargs) as sent, the modules built there as their handles; and what was handed over."""
    handed = list(args) + list((kwargs or {}).values())
    return (tuple(by_handle(client, a) for a in args), {k: by_handle(client, v) for k, v in (kwargs or {}).items()},
            handed)


def parameters(info: dict) -> list:
    """A RemoteClass's constructor parameters: each named one with its plain default as the server read it."""
    given = info.get("defaults") if isinstance(info.get("defaults"), dict) else {}
    return [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=plain_default(given.get(p)))
            for p in info.get("params") or () if isinstance(p, str) and p.isidentifier()]


def by_handle(client, x):
    """x sent as its handle when it is a module this client's server built; anything else as is."""
    if _proxy(x) and object.__getattribute__(x, "_client") is client:
        return wire.Handle(object.__getattribute__(x, "_h"))
    return x


def modes_after(handed: list, modes) -> None:
    """The train/eval mode each module handed over was left in there (greedy_decode's model.eval()), onto its
    proxy: [[handle, bool]] rows, the first 64 read."""
    rows = modes[:64] if isinstance(modes, list) else ()
    by = {r[0]: r[1] for r in rows if isinstance(r, list) and len(r) == 2 and type(r[0]) is int and type(r[1]) is bool}
    for x in handed:
        if _proxy(x) and object.__getattribute__(x, "_h") in by:
            x.training = by[object.__getattribute__(x, "_h")]


def returned(ans: dict, handed: list):
    """The call's value; a handle answered (train's `return model`): the proxy of that module handed over (any
    other: None). The modes the modules handed over were left in go onto their proxies first."""
    modes_after(handed, ans.get("training"))
    value = ans.get("value")
    if not isinstance(value, wire.Handle):
        return value
    return next((x for x in handed if _proxy(x) and object.__getattribute__(x, "_h") == value.n), None)


def plain_default(v):
    """A parameter's default as the server read it: a bool, a finite number or a short string; else None (as
    when the server sends none)."""
    if type(v) is bool or type(v) is int and abs(v) < 2 ** 53 or type(v) is str and len(v) <= MAX_TEXT:
        return v
    return v if type(v) is float and v == v and abs(v) != float("inf") else None


def function_signature(info: dict):
    """A function's parameters as the server read them (Server._resolve): the named ones with their plain
    defaults (a default it could not send counts as none), **kwargs when it takes them."""
    given = info.get("defaults") if isinstance(info.get("defaults"), dict) else {}
    ps = [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                            default=plain_default(given[p]) if p in given else inspect.Parameter.empty)
          for p in info["params"][:64] if isinstance(p, str) and p.isidentifier()]
    if info.get("varkw") is True:
        ps.append(inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD))
    return inspect.Signature(ps, __validate_parameters__=False)
