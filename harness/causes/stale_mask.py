from ..assignments import REVERSAL
from .base import SHAPE_ERRORS, Cause, Finding, Observed, say

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
    assignments=(REVERSAL.name,),
    mechanism=('attributes set on the model during forward and an output that depends on the batch seen before (a '
               'global cache without them: 0.6); or the decode mask built once for the first prefix'),
    observed=(Observed("stateless-forward", "data.attrs"), Observed("decode-consistency", values=("mask-not-for-prefix",))),
)


def diagnose(ev):
    c = ev.failed("stateless-forward")
    dec = ev.failed("decode-consistency")
    if c:
        attrs = (c.get("data") or {}).get("attrs") or []
        lines = [say(c)] + ([f"mechanism: attributes set on the model during forward: {', '.join(attrs)}"]
                            if attrs else [])
        # Every later call with another shape fails the same way: those errors are this cause's symptoms.
        errs = tuple(e["id"] for e in ev.errors_matching(*SHAPE_ERRORS)) if ev.passed("shapes") else ()
        # Without the attributes seen, the state kept between calls lives elsewhere (a global cache): lower.
        return Finding(0.9 if attrs else 0.6, lines, c.get("location"),
                       explains=("stateless-forward", "long-inputs", "padding-invariance", "decode-consistency")
                       + errs)
    if dec and ev.mechanism("decode-consistency").get("kind") == "mask-not-for-prefix" and \
            ev.passed("causal-leak"):
        return Finding(0.85, [say(dec), "mechanism: " + ev.mechanism("decode-consistency")["text"]],
                       dec.get("location"), explains=("decode-consistency", "decode-accuracy"),
                       fix="Build the target mask inside the decoding loop from the current prefix: "
                           "target_mask(ys) at every step, never once before the loop.")
    return None
