"""The child's integrity findings, added to its result: the failing check `tamper` (what the student's code
changed that the checks rely on) and `forbidden-ops` (what it tried outside its lane), and how much it printed.

Imported by child.py before any student code runs, so the guard (capture.py) watches these functions too.
"""
from __future__ import annotations

import types

from ..readable import cut
from ..assignments import assignment_of
from ..identity import GRADER_PREFIXES, is_grader_name


def tamper_check(check, guard, source) -> dict:
    """Only changes the student's own code made: torch's side effects (schedulers, compile, hooks) never count."""
    findings = guard.findings
    shown = ", ".join(findings[:8]) + (f" and {len(findings) - 8} more" if len(findings) > 8 else "")
    first = next((n for n in guard.lines if n), None)
    location = source.where(first) if (source is not None and first) else None
    return check("tamper", "fail", {"changed": findings[:40]},
                 "no changes to torch, builtins or the grader, and no use of the grader's own code",
                 f"your code changed what the checks rely on: {shown}. The originals were put back before the "
                 "checks continued; tampering is reported as a finding of its own.",
                 data={"changed": findings[:100], "lines": guard.lines[:100], "accepted": guard.accepted[:40]},
                 location=location)


def add_integrity(result, check, audit, guard, source, captured):
    """What the student's code tried outside its lane (check `forbidden-ops`), and how much it printed."""
    for name, line, where in guard.module_changes:
        if name.split(".")[0] in ("torch",) + GRADER_PREFIXES:
            audit.add_finding("sys.modules", name, line)
    attempts = audit.attempts()
    result["output_chars"] = captured.size + captured.dropped
    if not attempts:
        return
    for r in attempts:
        r["location"] = source.where(r["line"]) if (source is not None and r.get("line")) else None

    def one(r):
        shown = (r.get("location") or {}).get("cell_line") or r.get("line")
        at = f" at line {shown}" if shown else ""
        outcome = {True: "blocked", False: "not blocked", None: "outcome unknown"}[r["blocked"]]
        times = f", {r['count']} times" if r["count"] > 1 else ""
        return f"{r['op']} {r['target']}{at} ({outcome}{times}; {r['via']}, during {r['during']})"
    # every kind first (its first record), then the rest: decoys of one kind never hide another kind
    firsts = list({r["op"]: r for r in attempts[::-1]}.values())
    firsts.sort(key=lambda r: attempts.index(r))
    order = firsts + [r for r in attempts if not any(r is f for f in firsts)]
    shown = "; ".join(one(r) for r in order[:10]) + (f"; and {len(order) - 10} more" if len(order) > 10 else "")
    counts = {r["op"]: max(1, audit.counts.get(r["op"], 0)) for r in firsts}     # every attempt, by kind
    kinds = ", ".join(f"{op} ({n} times)" if n > 1 else op for op, n in counts.items())
    first = next((r["location"] for r in attempts if r.get("location")), None)
    result["checks"].insert(0, check(
        "forbidden-ops", "fail", len(attempts) + audit.dropped,
        "no network, no files or folders outside the submission's own, no processes, no native code",
        cut(f"your code tried {kinds}: {shown}", 1900),
        data={"attempts": attempts, "dropped": audit.dropped, "ops": sorted(counts), "counts": counts},
        location=first))


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def grader_reach(guard, name: str, obj) -> None:
    """A contract name (or a part of the built model) that is the grader's own code, however the submission
    got to it (an import, `sys.modules[...]`, a module-level __getattr__ delegating to the reference):
    a tamper finding. Only exact types are read: attribute access on the student's objects could run code."""
    if type(obj) is types.ModuleType:
        mod = obj.__dict__.get("__name__")
    elif isinstance(obj, type):
        mod = type.__dict__["__module__"].__get__(obj)
    elif type(obj) in (types.FunctionType, types.MethodType, staticmethod, classmethod):
        mod = getattr(obj, "__module__", None)
    else:
        return
    if isinstance(mod, str) and is_grader_name(mod) and mod != "__main__":
        guard._found(f"uses the grader's own code: {name} comes from {mod}", None,
                     guard.sites.referenced.get("modules") or guard.sites.referenced.get(name))


def guarded_context(Context, StudentError, guard, hidden=None):
    """The probes' Context, guarded: integrity checked after each call into student code, outputs vetted."""
    from contextlib import contextmanager

    import torch

    from .capture import bad_tensor
    from .probes.common import VOCAB

    class GuardedContext(Context):
        @contextmanager
        def student(self, where, seconds=None):
            token = guard.enter()
            try:
                # hide.py: no grader modules in sys.modules while student code runs, where the assignment
                # allows it (Assignment.hides_grader says why lm does not yet)
                hide = hidden if assignment_of(self.assignment).hides_grader else None
                with Context.student(self, where, seconds), (hide or _nothing()):
                    yield
            finally:
                guard.check(where, token, hot=True)

        def forward(self, model, src, tgt_in, where="model(src, tgt_in)"):
            logits, maps = Context.forward(self, model, src, tgt_in, where)
            problem = bad_tensor(logits, self.device)
            if problem:
                raise StudentError(TypeError(problem), None, where)
            if assignment_of(self.assignment).seq2seq:
                want = (int(src.shape[0]), int(tgt_in.shape[1]), VOCAB)
                got = tuple(int(s) for s in logits.shape)
                if got != want:
                    self.odd = f"forward returned logits of shape {list(got)}, expected {list(want)}"
                elif not bool(torch.isfinite(logits.detach()).all()):
                    self.odd = "forward returned NaN or infinite logits"
            return logits, maps

        def need(self, *names):
            got = Context.need(self, *names)
            for name, obj in zip(names, got if len(names) > 1 else [got]):
                grader_reach(guard, name, obj)
            return got

        def model(self, seed=None, **kw):
            m = Context.model(self, seed, **kw)
            if getattr(type(m), "__mtxdiag_remote__", False):   # the prober's proxy of a model built in the server
                return m
            for sub in list(m.modules())[:2000] if isinstance(m, torch.nn.Module) else [m]:
                grader_reach(guard, "the model", type(sub))
            return m

    return GuardedContext
