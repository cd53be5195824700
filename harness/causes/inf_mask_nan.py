from .base import Cause, Finding, say

CAUSE = Cause(
    id="inf-mask-nan",
    title="Masking with -inf: a fully masked row becomes NaN",
    what="masked_fill(..., float('-inf')) where a whole row can be masked (a fully padded source).",
    why="softmax over a row of -inf is 0/0 = NaN, and one NaN poisons every parameter on the backward pass.",
    symptom="NaN after a few hundred steps, or as soon as a batch contains a fully padded row.",
    fix="Use a large finite negative number such as -1e9 (a fully masked row then becomes uniform, harmless).",
    lesson="Debugging table, row 5; Step 2 '-1e9 rather than float(\"-inf\")'.",
    assignments=("reversal",),
)


def diagnose(ev):
    c = ev.failed("padded-row-finite")
    if not c:
        return None
    return Finding(0.9, [say(c)], c.get("location"))
