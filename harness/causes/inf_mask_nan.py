from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="inf-mask-nan",
    title="Masking with -inf: a fully masked row becomes NaN",
    what="masked_fill(..., float('-inf')) where a whole row can be masked (a fully padded source).",
    why="softmax over a row of -inf is 0/0 = NaN, and one NaN poisons every parameter on the backward pass.",
    symptom="NaN after a few hundred steps, or as soon as a batch contains a fully padded row.",
    fix="Use a large finite negative number such as -1e9 (a fully masked row then becomes uniform, harmless).",
    lesson="Debugging table, row 5; Step 2 '-1e9 rather than float(\"-inf\")'.",
    assignments=(REVERSAL.name,),
    mechanism=('the NaN traced to a softmax row whose every key is -inf, in an ordinary padded batch (only an all-'
               'PAD row: below 0.5)'),
    observed=(Observed("padded-row-finite", values=("inf-row",)),),
)


def diagnose(ev):
    c = ev.failed("padded-row-finite")
    if not c:
        return None
    d = c.get("data") or {}
    mech = d.get("mechanism") or {}
    lines = [say(c)] + (["mechanism: " + mech["text"]] if mech.get("text") else [])
    if mech.get("kind") != "inf-row":
        return None              # a NaN from elsewhere: the catch-all reports where it starts
    if d.get("realistic"):
        return Finding(0.9, lines + ["an ordinary padded batch gives NaN too"], c.get("location"))
    # Only a source that is entirely padding gives NaN: the lesson's warning, a robustness issue that real
    # batches never meet (nn.MultiheadAttention does the same), so it is reported below 0.5.
    return Finding(0.4, lines + ["ordinary padded batches stay finite: only a row with every key masked fails"],
                   c.get("location"), title="NaN when a whole row is masked (-inf in the mask)")
