"""What the guard watches, and its record taken before the student's code runs (`capture()`).

This module imports torch only inside its functions: the parent imports the harness without paying for it.
"""
from __future__ import annotations

import sys
import types

from . import hookwatch
from .guard import Guard
from ..identity import fn_parts, is_grader_name

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
            parts = fn_parts(v) if isinstance(v, types.FunctionType) else None
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
        if not isinstance(mod, types.ModuleType) or not is_grader_name(name):
            continue
        label = "harness.child.main" if name == "__main__" else name
        watch_namespace(label, mod, False, False)
        for k, v in list(vars(mod).items()):
            if isinstance(v, type) and getattr(v, "__module__", None) == mod.__name__:
                watch_class(f"{label}.{k}", v)
            elif type(v) in (dict, list, set):
                g.containers.append((f"{label}.{k}", v, type(v)(v) if not isinstance(v, dict) else dict(v)))
            elif type(v) is tuple:
                for i, item in enumerate(v):
                    if hasattr(item, "__dict__") and type(item).__module__ and is_grader_name(type(item).__module__):
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
        "hookwatch": hookwatch.snapshot(),
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
