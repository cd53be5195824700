from .base import SHAPE_ERRORS, Cause, Finding, say

CAUSE = Cause(
    id="stale-mask",
    title="Masks built once and reused for another batch",
    what="The masks are cached (on self, or outside the loop) and reused for batches of other lengths or "
         "padding.",
    why="A mask describes one batch; reused, it blocks the wrong positions or has the wrong shape.",
    symptom="Works on the first batch or length, fails or misbehaves on the next; 'works at length 6, fails at "
            "30'.",
    fix="Build masks from the actual tensors inside forward() on every call.",
    lesson="Debugging table, row 8: 'Build masks from the actual tensor shapes each step'.",
    assignments=("reversal",),
)


def diagnose(ev):
    c = ev.failed("stateless-forward")
    if not c:
        return None
    attrs = (c.get("data") or {}).get("attrs") or []
    lines = [say(c)] + ([f"attributes set on the model during forward: {', '.join(attrs)}"] if attrs else [])
    # Every later call with another shape fails the same way: those errors are this cause's symptoms.
    errs = tuple(e["id"] for e in ev.errors_matching(*SHAPE_ERRORS)) if ev.passed("shapes") else ()
    return Finding(0.9, lines, c.get("location"), explains=("stateless-forward", "long-inputs", "padding-invariance")
                   + errs)
