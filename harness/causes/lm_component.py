"""Causes of the `lm` assignment, first round: which component is wrong, and how it fails.

A component is diagnosed only where its failure starts: when a component it is
normally built from (DEPS) fails too, its failure is folded into that one's
evidence ("also explains"). Rules are objects, one per component and kind, so
that independent failures each get their own diagnosis.
"""
from __future__ import annotations

import re
from dataclasses import replace

from ..probes.lm_common import ADAPTER, COMPONENTS, DEPS
from .base import Cause, Finding, say
from .load_failures import FORWARD, MISSING_MODULE

LM = ("lm",)

MISMATCH = Cause(
    "component-mismatch", "A component's output differs from the reference",
    "The adapter runs, but its output differs from the reference implementation's on the same inputs and weights "
    "by more than float32 rounding allows.",
    "Every later component is built on this one: a wrong RMSNorm or RoPE makes the block and the language model "
    "wrong too, and training quietly learns less.",
    "lm-<component> fails with the max abs and relative error on the first failing input.",
    "Compare your implementation with the handout's formula for this component on the failing input shown.",
    assignments=LM)
INTERFACE = Cause(
    "interface-mismatch", "The adapter and your module disagree on names or arguments",
    "The adapter raises because of the interface, not the maths: a state-dict key your module names differently "
    "or lacks, arguments in the wrong order, a missing argument, or a result that is not a tensor.",
    "The course's tests call the adapters with these exact names; the component cannot be checked until they "
    "match.", "An exception about state_dict keys, arguments or the return value.",
    "Name the parameters as the adapter's weights dict does (e.g. `weight`, `attn.q_proj.weight`) or map the names "
    "in tests/adapters.py; pass the arguments in the adapter's order.", assignments=LM)
NOT_IMPLEMENTED = Cause(
    "not-implemented", "Components not implemented yet",
    "Adapters that still raise NotImplementedError.", "Those components are not checked (nor graded) yet.",
    "lm-<component> is skipped with 'not implemented'.", "Implement the component and call it from its adapter.",
    assignments=LM)
LM_MISSING_MODULE = replace(MISSING_MODULE, assignments=LM)
LM_FORWARD = replace(FORWARD, assignments=LM)

INTERFACE_CAUSES = (INTERFACE, NOT_IMPLEMENTED)


def _upstream(comp: str) -> set:
    out, todo = set(), list(DEPS.get(comp, ()))
    while todo:
        c = todo.pop()
        if c not in out:
            out.add(c)
            todo.extend(DEPS.get(c, ()))
    return out


def _downstream(comp: str) -> tuple:
    return tuple(f"lm-{c}" for c, _, _ in COMPONENTS if comp in _upstream(c))


def _broken(ev, comp: str) -> bool:
    c = ev.get(f"lm-{comp}")
    return bool(c) and c["status"] in ("fail", "error")


def _interface_detail(msg: str) -> str:
    """Both sides of a state-dict mismatch, from load_state_dict's own message."""
    missing = re.search(r"Missing key\(s\) in state_dict: (.*?)\.(?: |$)", msg)
    extra = re.search(r"Unexpected key\(s\) in state_dict: (.*?)\.(?: |$)", msg)
    if missing or extra:
        return (f"your module's parameters are named {missing.group(1) if missing else '(all given)'}; "
                f"the adapter passes {extra.group(1) if extra else '(all expected)'}")
    return msg[:300]


class ComponentRule:
    """One component, one kind of failure (mismatch | interface | error)."""

    def __init__(self, comp: str, kind: str):
        self.comp, self.kind = comp, kind
        self.CAUSE = {"mismatch": MISMATCH, "interface": INTERFACE, "error": LM_FORWARD}[kind]
        self.__name__ = f"lm_{comp}_{kind}"

    def diagnose(self, ev):
        c = ev.get(f"lm-{self.comp}")
        if not c or c["status"] not in ("fail", "error"):
            return None
        d = c.get("data") or {}
        kind = {"shape": "mismatch", "timeout": "error", "missing-module": None}.get(d.get("kind"), d.get("kind"))
        if kind != self.kind or any(_broken(ev, u) for u in _upstream(self.comp)):
            return None
        name = ADAPTER[self.comp]
        if self.kind == "mismatch":
            ev_lines = [f"{self.comp} ({name}) differs from the reference: " + c["detail"], say(c)]
            f = Finding(0.6, ev_lines, c.get("location"), explains=_downstream(self.comp))
        elif self.kind == "interface":
            detail = _interface_detail(str(d.get("message", "")))
            f = Finding(0.9, [f"{self.comp} ({name}) fails on the interface: {detail}", say(c)], c.get("location"),
                        explains=_downstream(self.comp))
        else:
            f = Finding(0.6, [f"{self.comp} ({name}) raised: {c['detail']}", say(c)], c.get("location"),
                        explains=_downstream(self.comp))
        f.component = self.comp
        return f


class MissingModuleRule:
    """Every component that needs a module that is not installed, in one diagnosis per run."""
    CAUSE = LM_MISSING_MODULE
    __name__ = "lm_missing_module"

    def diagnose(self, ev):
        hits = [(comp, ev.get(f"lm-{comp}")) for comp, _, _ in COMPONENTS]
        hits = [(comp, c) for comp, c in hits if c and c["status"] == "error"
                and (c.get("data") or {}).get("kind") == "missing-module"]
        if not hits:
            return None
        mods = sorted({str((c.get("data") or {}).get("missing_module") or "?") for _, c in hits})
        lines = [f"{', '.join(comp for comp, _ in hits)}: cannot run without the module(s) {', '.join(mods)}, "
                 "which are not installed"]
        for comp, c in hits[:6]:
            lines.append(f"lm-{comp}: {c['detail'][:300]}")
        f = Finding(1.0, lines, hits[0][1].get("location"), explains=tuple(f"lm-{comp}" for comp, _ in hits),
                    fix=f"Install {', '.join(mods)} (`pip install 'mtxdiag[lm]'` has the usual ones) or remove the "
                        "import from the code these components use.")
        f.component = hits[0][0]
        return f


class NotImplementedRule:
    CAUSE = NOT_IMPLEMENTED
    __name__ = "lm_not_implemented"

    def diagnose(self, ev):
        todo = [comp for comp, _, _ in COMPONENTS
                if (ev.get(f"lm-{comp}") or {}).get("status") == "skip"
                and ((ev.get(f"lm-{comp}") or {}).get("data") or {}).get("kind") == "not-implemented"]
        if not todo:
            return None
        f = Finding(0.9, [f"{len(todo)} of {len(COMPONENTS)} components raise NotImplementedError: "
                          f"{', '.join(todo)}"], None)
        f.component = todo[0]
        return f


RULES = (MissingModuleRule(),) + tuple(ComponentRule(comp, kind) for kind in ("interface", "error", "mismatch")
                                       for comp, _, _ in COMPONENTS) + (NotImplementedRule(),)
CAUSES = (MISMATCH, INTERFACE, NOT_IMPLEMENTED)
