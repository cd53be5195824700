"""A piece's constructor takes the contract's arguments in another order (any pack's binding)."""
from .base import Cause, Finding, say
from ..packs.checks import ROLE_CHECKS
from .role_rules import ASSIGNMENTS, kind, observed

CAUSE = Cause(
    id='constructor-signature',
    title="The constructor's parameters are in another order than the course's",
    what="The class's __init__ was rewritten with the contract's parameters in another order, so the course's call (e.g. CaptioningTransformer(word_to_idx, input_dim=...)) binds the wrong values and the constructor raises.",
    why='Nothing of the piece can be built as the course builds it: every check of it, the course\'s included, fails before it runs.',
    symptom="Building the piece as the contract does raises, in every check of it.",
    fix="Keep the handout's signature: the parameters in the contract's order with its defaults.",
    lesson='CS231n assignment 3: the constructors\' signatures are part of the contract the notebook calls.',
    assignments=ASSIGNMENTS,
    mechanism="the constructor called as the contract calls it raises, and its parameters (read by inspect) hold the reference's in another order (kind parameter-order)",
    observed=tuple(o for role, probes in ROLE_CHECKS.items()
                   for o in observed(role, tuple(p for p, _, _ in probes), ("parameter-order",))),
)


def diagnose(ev):
    out, seen = [], set()
    for cid, c in ev.by_id.items():
        if c.get("status") != "error" or kind(c) != "parameter-order":
            continue
        comp = str((c.get("data") or {}).get("component") or cid.rsplit(".", 1)[0])
        head = comp.split(".")[0]
        if head in seen:
            continue
        seen.add(head)
        mech = ((c.get("data") or {}).get("mechanism") or {}).get("text")
        mine = tuple(i for i, x in ev.by_id.items() if str((x.get("data") or {}).get("component") or "")
                     .split(".")[0] == head)
        out.append(Finding(0.95, [say(c)] + ([f"mechanism: {mech}"] if mech else []), c.get("location"),
                           explains=mine, component=head))
    return out or None
