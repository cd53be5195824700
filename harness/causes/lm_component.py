"""Causes of the `lm` assignment, first round: which component is wrong, and how it fails.

A component is diagnosed only where its failure starts: when its traced failing
run first diverges (or raises) on a line that another failing component's own run
executed, and it has no evidence of its own, its failure is folded into that one's
evidence ("also explains"); a failure that starts in its own code, or that its own
evidence names, is its own diagnosis, whatever it is built from (harness/causes/lm_rank.py:
the fold and the order). A rule returns one finding per component where a
failure starts, so that independent failures each get their own diagnosis. A
failing component whose outputs equal a known bug's (a mutant fingerprint) is
diagnosed as that bug.
"""
from __future__ import annotations

import re
from dataclasses import replace

from ..readable import cut
from ..assignments import LM as LM_ASSIGNMENT
from ..lm_table import ADAPTER, COMPONENTS
from .base import Cause, Finding, say
from .lm_rank import broken as _broken, folded_into, visibility_line
from .load_failures import FORWARD, MISSING_MODULE

LM = (LM_ASSIGNMENT.name,)

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


def _interface_detail(msg: str) -> str:
    """Both sides of a state-dict mismatch, from load_state_dict's own message."""
    missing = re.search(r"Missing key\(s\) in state_dict: (.*?)\.(?: |$)", msg)
    extra = re.search(r"Unexpected key\(s\) in state_dict: (.*?)\.(?: |$)", msg)
    if missing or extra:
        return (f"your module's parameters are named {missing.group(1) if missing else '(all given)'}; "
                f"the adapter passes {extra.group(1) if extra else '(all expected)'}")
    return cut(msg, 300)


def _sides(d: dict) -> list[str]:
    """Both sides of a key mismatch, the adapter's first: where the key is written, where the attribute is."""
    sides = d.get("sides") if isinstance(d.get("sides"), dict) else {}
    out = []
    for side, what in (("adapter", "the adapter writes the key at"), ("module", "the module defines the attribute at")):
        loc = sides.get(side)
        if isinstance(loc, dict) and loc.get("file") and isinstance(loc.get("line"), int):
            out.append(f"{what} {loc['file']}:{loc['line']}")
    return out


def _fingerprint_mutant(fp: dict | None):
    """The registry's mutant the child says the outputs match (by id: the child's own cause and texts are not
    trusted), or None for an id the registry does not know."""
    from .lm_decide import MUTANTS
    mid = fp.get("mutant") if isinstance(fp, dict) else None
    m = MUTANTS.get(mid) if isinstance(mid, str) else None
    return m if m is not None and m.cause in FINGERPRINT_CAUSES else None


class ComponentRule:
    """One kind of failure (mismatch | interface | error), one finding per component where it starts."""

    def __init__(self, kind: str):
        self.kind = kind
        self.CAUSE = {"mismatch": MISMATCH, "interface": INTERFACE, "error": LM_FORWARD}[kind]
        self.__name__ = f"lm_{kind}"

    def diagnose(self, ev):
        found = [f for comp, _, _ in COMPONENTS for f in [self._one(ev, comp)] if f is not None]
        return found or None

    def _one(self, ev, comp):
        c = ev.get(f"lm-{comp}")
        if not c or c["status"] not in ("fail", "error"):
            return None
        d = c.get("data") or {}
        kind = {"shape": "mismatch", "timeout": "error", "missing-module": None}.get(d.get("kind"), d.get("kind"))
        if kind != self.kind or folded_into(ev, comp):
            return None
        name = ADAPTER[comp]
        below = {comp} | {x for x, _, _ in COMPONENTS if x != comp and _broken(ev, x) and folded_into(ev, x) == comp}
        props = [p for p in ev.by_id.values() if (p.get("data") or {}).get("property")
                 and (p.get("data") or {}).get("component") in below]
        trained = ((ev.get("lm-training") or {}).get("data") or {}).get("component")   # where training failed
        explains = tuple(f"lm-{x}" for x, _, _ in COMPONENTS if x in below) + tuple(p["id"] for p in props) + \
            (("lm-training",) if trained in below else ())
        own = [p for p in props if p["status"] == "fail" and p["data"]["component"] == comp]
        fp = d.get("fingerprint") if isinstance(d.get("fingerprint"), dict) else None
        order = [a for a in d.get("argument_order") or () if isinstance(a, dict) and isinstance(a.get("line"), int)]
        if order and self.kind in ("mismatch", "error"):
            # symptom (the component fails) and mechanism (a value lands in another parameter's slot) observed
            f = Finding(0.85, [f"{comp} ({name}): " + "; ".join(
                f"{a.get('callee')}(...) gets {a.get('argument')} in the slot of its parameter {a.get('slot')}"
                for a in order[:3]) + " (pass them by keyword)", say(c)],
                {"file": order[0].get("file"), "line": order[0]["line"]}, explains=explains)
            f.cause = INTERFACE
        elif self.kind in ("mismatch", "error") and (mut := _fingerprint_mutant(fp)) is not None:
            # symptom (differs from the reference) and mechanism (equals the reference with this edit) observed
            also = [cut(a, 80) for a in fp.get("also_matches") or ()][:5] if isinstance(fp.get("also_matches"),
                                                                                         list) else []
            size = fp.get("max_abs") if isinstance(fp.get("max_abs"), (int, float)) else float("nan")
            f = Finding(0.95 if not also else 0.8,
                        [f"{comp} ({name}) equals the reference with '{mut.summary}' to {size:.1g} on "
                         f"{fp.get('draws')} draws" + (f" (also equal to: {', '.join(also)})" if also else ""),
                         say(c), cut(mut.explanation, 600)],
                        c.get("location"), explains=explains, fix=getattr(mut, "fix", "") or mut.lesson or None)
            f.cause = FINGERPRINT_CAUSES[mut.cause]
        elif self.kind == "mismatch" and d.get("diagnosis") in FINGERPRINT_CAUSES:
            f = Finding(0.9, [f"{comp} ({name}): {c['detail']}", say(c)], c.get("location"), explains=explains)
            f.cause = FINGERPRINT_CAUSES[d["diagnosis"]]
        elif self.kind == "mismatch" and own and _property_cause(own[0]):
            # symptom (differs from the reference) and mechanism (a property every correct one has fails)
            p = own[0]
            # softmax merely off at x + 100 (finite) may be low precision rather than a missing shift: below 0.8
            weak = p["data"].get("property") == "shift-invariant" and (p.get("measured") or {}).get("violation")
            f = Finding(0.7 if weak else 0.85, [f"{comp} ({name}): {p['detail']}", say(p), say(c)], c.get("location"),
                        explains=explains)
            f.cause = _property_cause(p)
        elif self.kind == "mismatch" and _lmdiag_cause(d):
            # lm_decide named it from harness.child.probes.lm.diag's measurements (engine.validate_payload -> lm_decide.annotate):
            # a fingerprint on lmdiag's own inputs, an interface finding or a property's mechanism, with evidence
            ld = d["lmdiag"]
            f = Finding(min(float(ld.get("confidence") or 0.6), 0.95),
                        [f"{comp} ({name}): " + cut("; ".join(ld.get("evidence") or []), 800), say(c)],
                        c.get("location"), explains=explains)
            f.cause = _lmdiag_cause(d)
        elif self.kind == "mismatch":
            f = Finding(0.6, [f"{comp} ({name}) differs from the reference: " + c["detail"], say(c)],
                        c.get("location"), explains=explains)
        elif self.kind == "interface":
            detail = _interface_detail(str(d.get("message", "")))
            f = Finding(0.9, [f"{comp} ({name}) fails on the interface: {detail}", say(c)] + _sides(d),
                        c.get("location"), explains=explains)
        else:
            f = Finding(0.6, [f"{comp} ({name}) raised: {c['detail']}", say(c)], c.get("location"),
                        explains=explains)
        f.component = comp
        seen = visibility_line(ev, comp, getattr(getattr(f, "cause", None), "id", None), c["detail"])
        if seen:
            f.evidence.append(seen)
        if getattr(getattr(f, "cause", None), "id", None) == INTERFACE.id and self.kind != "interface" and \
                isinstance(d.get("adapter_location"), dict):
            f.location = d["adapter_location"]     # an interface problem is where the adapter hands values over
        if f.location is None:
            f.location = _where(ev, comp)
        return f


def _where(ev, comp: str) -> dict | None:
    """The first of the student's functions that ran for this component and for no passing component
    (a method like RMSNorm.forward rather than its __init__): where the wrong output starts."""
    fns = (ev.data(f"lm-{comp}") or {}).get("functions") or []
    passing = {(f[0], f[1]) for c in ev.by_id.values() if c["status"] == "pass" and c["id"].startswith("lm-")
               for f in ((c.get("data") or {}).get("functions") or []) if isinstance(f, list) and len(f) == 3}
    mine = [f for f in fns if isinstance(f, list) and len(f) == 3 and (f[0], f[1]) not in passing]
    adapters = set(ADAPTER.values())     # a functional style implements the component in the adapter itself

    def rank(f):     # the package's own methods first; then the adapters; constructors and <genexpr> last
        name = str(f[2])
        if "__init__" in name or "<" in name:
            return 2
        return 1 if name in adapters or str(f[0]).endswith("adapters.py") else 0
    pick = min(mine, key=rank) if mine else None      # min is stable: the first call of the best rank
    return {"file": str(pick[0]), "line": int(pick[1]), "function": str(pick[2])} if pick else None


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


ROBUSTNESS = Cause(
    "robustness-note", "Works on the course's inputs, not on others the signature allows",
    "The adapter passes on the argument shapes and options the course's interface documents and its tests use, "
    "but raises or differs on another input its signature also allows (a 2-D input, no mask, 1-D positions).",
    "Nothing the course grades: a note for code that will be reused beyond the assignment.",
    "A case marked 'beyond the course's inputs' raises or differs from the reference.",
    "Write the component for any number of leading batch axes (`...` in einsum, x.shape[:-1]) and treat an "
    "optional argument's None as the handout says.", assignments=LM, severity="info")


class RobustnessRule:
    """A component right on the course's inputs that breaks on other inputs its signature allows: info."""
    CAUSE = ROBUSTNESS
    __name__ = "lm_robustness"

    def diagnose(self, ev):
        out = []
        for comp, name, _ in COMPONENTS:
            c = ev.get(f"lm-{comp}")
            notes = ((c or {}).get("data") or {}).get("robustness")
            if not c or c["status"] != "pass" or not isinstance(notes, list) or not notes:
                continue
            f = Finding(0.9, [f"{comp} ({name}) passes on the course's inputs; " + cut("; ".join(
                f"{n.get('case')}: {n.get('problem')}" for n in notes if isinstance(n, dict)), 800)],
                next((n["location"] for n in notes if isinstance(n, dict) and isinstance(n.get("location"), dict)),
                     None) or _where(ev, comp))
            f.component = comp
            out.append(f)
        return out or None


NEWER_PYTHON = Cause(
    "needs-newer-python", "The code uses a feature of a newer Python than the grader's",
    "An import names something the standard library gained in a later Python (typing.override: 3.12); the grader "
    "used typing_extensions' equivalent, so everything was checked.",
    "Nothing to fix in the code: the grader's environment is older than the one it was written for.",
    "lm-environment lists the names and where they are imported.",
    "Nothing needed; for Python 3.11 compatibility import it from typing_extensions.", assignments=LM,
    severity="info")


class NewerPythonRule:
    CAUSE = NEWER_PYTHON
    __name__ = "lm_newer_python"

    def diagnose(self, ev):
        c = ev.get("lm-environment")
        if not c or c["status"] != "info":
            return None
        return Finding(0.9, [say(c)], c.get("location"))


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


def _mutant_causes() -> dict:
    """A Cause for every lm mutant's bug (its id is the mutant's cause; the text is the mutant's description; the
    fix its `fix` edit, else the lesson's passage it breaks)."""
    try:
        from mutants import LM_MUTANTS
    except ImportError:       # an installation without the mutant library: no fingerprints, no causes for them
        return {}
    out = {}
    for m in LM_MUTANTS:
        out.setdefault(m.cause, Cause(m.cause, m.summary, m.explanation, "A wrong component makes every part built "
                                      "on it wrong, and training learns less or nothing.",
                                      "Its outputs equal the reference's with this edit on several random draws.",
                                      getattr(m, "fix", "") or m.lesson, assignments=LM))
    return out


FINGERPRINT_CAUSES = _mutant_causes()


def _pc(id, title, what, fix):
    return Cause(id, title, what, "Every part built on this component inherits the error.",
                 "A property every correct implementation has fails (check lm-<component>-<property>).", fix,
                 assignments=LM)


PROPERTY_CAUSES = {
    ("rope", "identity-at-0"): _pc("rope-rotates-at-position-0", "RoPE changes vectors at position 0",
                                   "At position 0 every rotation angle is 0, so RoPE must return its input unchanged.",
                                   "The angle of pair i at position m is m * theta^(-2i/d_k): check how the angle is "
                                   "built from the position."),
    ("rope", "norm-preserving"): _pc("rope-not-a-rotation", "RoPE is not a rotation",
                                     "RoPE changes the norm of a vector, so it is not a rotation of each pair.",
                                     "Rotate each pair (x_2i, x_2i+1) by [[cos, -sin], [sin, cos]]; use each "
                                     "coordinate once."),
    ("rope", "relative"): _pc("rope-not-relative", "RoPE scores do not depend on the offset alone",
                              "q_m . k_n must depend only on m - n; it changes with the absolute positions.",
                              "Rotate by angle = position x frequency, the same frequencies for q and k, and index "
                              "by the given token_positions."),
    ("rmsnorm", "scale-invariant"): _pc("rmsnorm-not-scale-invariant", "RMSNorm depends on the input's scale",
                                        "RMSNorm(c x) must equal RMSNorm(x): dividing by the root mean square "
                                        "removes the scale.", "x / sqrt(mean(x^2, dim=-1) + eps) * weight."),
    ("softmax", "shift-invariant"): _pc("softmax-not-shift-invariant", "Softmax changes when a constant is added",
                                        "softmax(x + c) must equal softmax(x).",
                                        "exp(x - max) / sum(exp(x - max)) over the given dim."),
    ("*", "causal"): _pc("future-tokens-visible", "Attention sees future tokens",
                         "Outputs at a position change when only a later token changes: the causal mask is missing, "
                         "inverted or off by one.", "Mask key j for query i whenever j > i (torch.tril of ones, True "
                                                    "= may attend)."),
}


def _lmdiag_causes() -> dict:
    """Causes only harness.child.probes.lm.diag's properties name (no mutant makes them): one document each."""
    from ..lm_property_causes import PROPERTY_CAUSES as TITLES
    known = {c.id for c in PROPERTY_CAUSES.values()} | set(FINGERPRINT_CAUSES)
    return {cid: Cause(cid, title[0].upper() + title[1:], title + ".",
                       "Every part built on this component inherits the error.",
                       "lm-<component> fails; the property named in the evidence does not hold.",
                       "Compare the component with the handout's formula on the failing input shown.",
                       assignments=LM)
            for cid, title in TITLES.items() if cid not in known}


LMDIAG_CAUSES = _lmdiag_causes()


def _lmdiag_cause(d: dict) -> Cause | None:
    ld = d.get("lmdiag") if isinstance(d.get("lmdiag"), dict) else {}
    cid = ld.get("cause")
    if not cid or cid == "interface-mismatch":
        return INTERFACE if cid else None
    return FINGERPRINT_CAUSES.get(cid) or LMDIAG_CAUSES.get(cid) or \
        next((c for c in PROPERTY_CAUSES.values() if c.id == cid), None)


def _property_cause(p: dict) -> Cause | None:
    d = p.get("data") or {}
    if d.get("property") == "shift-invariant" and (p.get("measured") or {}).get("violation") is None:
        return FINGERPRINT_CAUSES.get("softmax-overflow") or PROPERTY_CAUSES[("softmax", "shift-invariant")]
    if d.get("property") == "per-token":
        return FINGERPRINT_CAUSES.get("rmsnorm-wrong-axis")
    return PROPERTY_CAUSES.get((d.get("component"), d.get("property"))) or PROPERTY_CAUSES.get(("*", d.get("property")))
RULES = (MissingModuleRule(), ComponentRule("interface"), ComponentRule("error"), ComponentRule("mismatch"),
         NotImplementedRule(), RobustnessRule(), NewerPythonRule())
CAUSES = (MISMATCH, INTERFACE, NOT_IMPLEMENTED, ROBUSTNESS, NEWER_PYTHON) + tuple(FINGERPRINT_CAUSES.values()) + tuple(PROPERTY_CAUSES.values()) \
    + tuple(LMDIAG_CAUSES.values())
