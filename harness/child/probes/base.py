"""What every probe shares: the context it measures in, and the check it returns.

Probes measure and never diagnose. A check says what was measured, what a
correct implementation gives (calibrated on the reference and on correct
alternatives), and pass/fail against that; the engine (parent process) turns
checks into causes.
"""
from __future__ import annotations

import copy
import math
import signal
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from ..loader import Source, student_line


class Skip(Exception):
    """The probe cannot run: a name it needs is absent, or an earlier probe failed."""


class NotRun(Skip):
    """The run's own options leave the probe out (--quick: no training): nothing of the model was measured. Its
    check carries data.not_run, so a repair's re-check never reads it as the patched model's (repair/verify.py)."""


class StudentError(Exception):
    """An exception raised inside the student's code, with the student's line."""

    def __init__(self, exc: BaseException, line: int | None, where: str):
        super().__init__(f"{type(exc).__name__}: {exc}")
        self.exc, self.line, self.where = exc, line, where


class ProbeTimeout(Exception):
    pass


def check(id: str, status: str, measured: Any = None, expected: str = "", detail: str = "",
          data: dict | None = None, location: dict | None = None) -> dict:
    return {"id": id, "status": status, "measured": measured, "expected": expected,
            "detail": detail, "data": data or {}, "location": location}


def rnd(x: float, n: int = 4) -> float | None:
    x = float(x)
    return None if math.isnan(x) or math.isinf(x) else round(x, n)


def manual_seed(seed: int) -> None:
    """torch.manual_seed, less its CUDA bookkeeping where there is no CUDA (the CPU generator gets the same seed).

    Without CUDA, torch.manual_seed still queues a lazy CUDA seeding and formats the caller's stack for it
    (~0.3 ms a call, ~100 calls and ~2% of a quick check)."""
    SEEDINGS[0] += 1
    if torch.cuda.is_available():
        torch.manual_seed(seed)
    else:
        torch.default_generator.manual_seed(int(seed))


# manual_seed's calls, so that a model server's generator is seeded again with the same seed (roles/remote.py): an
# array, not a list, as the guard puts the grader's lists back as they were when it started (capture.py)
SEEDINGS = __import__("array").array("q", [0])


def seed_all(seed: int, label: str) -> None:
    """Seed torch's, Python's and numpy's global generators from (--seed, what runs next).

    torch seeds its default generator at random in each process, and a warm worker's forks would all inherit
    one state: seeded before loading and before each probe, whatever the student's code draws without a
    generator of its own (nn.init.trunc_normal_'s resampling, np.random in get_batch, dropout) is the same in
    every run, in one process or two, cold or warm."""
    import random
    import zlib
    s = zlib.crc32(f"{seed}:{label}".encode())
    manual_seed(s)
    random.seed(s)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(s)


@dataclass
class Context:
    module: Any
    source: Source
    assignment: str
    seed: int = 0
    device: str = "cpu"
    quick: bool = False
    artifacts: dict = field(default_factory=dict)
    cache: dict = field(default_factory=dict)
    slowdown: float = 1.0   # this machine's speed against the nominal one, measured on the reference
    reach: Any = None       # reached.Reach: which functions each probe ran (check --repair)

    def budget(self, seconds: float) -> float:
        """A time budget for student code, stretched on a slow or loaded machine."""
        return seconds * max(1.0, self.slowdown)

    # -- names of the contract -------------------------------------------
    def has(self, name: str) -> bool:
        return hasattr(self.module, name)

    def need(self, *names: str):
        missing = [n for n in names if not hasattr(self.module, n)]
        if missing:
            raise Skip(f"the submission does not define {', '.join(missing)}")
        got = [getattr(self.module, n) for n in names]
        return got[0] if len(got) == 1 else got

    def where(self, line: int | None) -> dict | None:
        return self.source.where(line) if line else None

    # -- running student code ---------------------------------------------
    @contextmanager
    def student(self, where: str, seconds: float | None = None):
        """Run student code: exceptions become StudentError with the line; a time budget."""
        seconds = seconds or self.budget(20.0)

        def on_alarm(signum, frame):
            raise ProbeTimeout(f"{where} did not return within {seconds:.0f} s")
        old = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        except (Skip, StudentError):
            raise
        except BaseException as e:  # SystemExit and KeyboardInterrupt from student code too
            line = student_line(e.__traceback__, self.source.code_path)
            if line is None and type(getattr(e, "line", None)) is int and hasattr(e, "file"):
                line = e.line           # raised in the model server (remote.RemoteFailure): its line, checked there
            if isinstance(e, ProbeTimeout):
                raise StudentError(e, line, where)
            raise StudentError(e, line, where) from e
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)

    def model(self, seed: int | None = None, **kw):
        """A fresh MiniTransformer (reversal) at the contract's defaults, seeded."""
        cls = self.need("MiniTransformer")
        manual_seed(self.seed if seed is None else seed)
        with self.student("MiniTransformer(...)"), self.construction_sites():
            m = cls(**kw)
        return m.to(self.device)

    @contextmanager
    def construction_sites(self):
        """Remember the student's line that built each module (`self.pos = PositionalEncoding(...)`).

        nn.Module.__init__ is wrapped while the model is built: every module's own __init__ reaches it, and
        one of the student's classes does so from its own __init__ (with `self` the new module), whose
        caller is the line that built it. (A profile hook saw the same and cost ~40% of building a model:
        it ran for every call made meanwhile.) Put back before the student call ends, so the guard, which
        watches nn.Module, finds only the student's own changes."""
        import sys
        sites = self.cache.setdefault("built_at", {})
        path = self.source.code_path
        real = torch.nn.Module.__init__

        def init(obj, *args, **kwargs):
            f = sys._getframe(1)
            if f.f_code.co_name == "__init__" and f.f_code.co_filename == path and f.f_locals.get("self") is obj:
                caller = f.f_back
                if caller is not None and caller.f_code.co_filename == path:
                    sites[id(obj)] = caller.f_lineno
            return real(obj, *args, **kwargs)
        torch.nn.Module.__init__ = init
        try:
            yield
        finally:
            if torch.nn.Module.__init__ is init:      # else the student's code replaced it: the guard's to find
                torch.nn.Module.__init__ = real

    def built_at(self, module) -> int | None:
        return self.cache.get("built_at", {}).get(id(module))

    def assignment_line(self, attr: str, exclude=("__init__",)) -> int | None:
        """First line outside __init__ that assigns self.<attr> (a cache filled during forward)."""
        import ast
        for node in ast.walk(ast.parse(self.source.text)):
            if isinstance(node, ast.FunctionDef) and node.name not in exclude:
                for sub in ast.walk(node):
                    if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                        targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                        for t in targets:
                            for e in ast.walk(t):
                                if isinstance(e, ast.Attribute) and e.attr == attr and \
                                        isinstance(e.value, ast.Name) and e.value.id == "self":
                                    return sub.lineno
        return None

    def forward(self, model, src, tgt_in, where="model(src, tgt_in)"):
        with self.student(where):
            out = model(src, tgt_in)
        logits = out[0] if isinstance(out, (tuple, list)) else out
        if not isinstance(logits, torch.Tensor):
            raise StudentError(TypeError(f"forward returned {type(logits).__name__}, expected a tensor of logits"),
                               None, where)
        return logits, (out[1] if isinstance(out, (tuple, list)) and len(out) > 1 else None)

    def copy(self, model):
        return copy.deepcopy(model)


def caller_line(ctx) -> int | None:
    """The student's line that is running right now (innermost frame in the student's file)."""
    import sys

    from ..recorder import walk
    frames = walk({ctx.source.code_path: ctx.source.code_path}, 1, sys._getframe(1))
    return frames[0].line if frames else None

