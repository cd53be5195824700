from ..assignments import REVERSAL
from .base import Cause, Finding, say

CAUSE = Cause(
    id="data-not-reversed",
    title="make_batch copies instead of reversing",
    what="The target is SOS + src + EOS: the .flip(0) is missing.",
    why="The model learns to copy; its cross-attention shows a diagonal instead of the anti-diagonal.",
    symptom="A bright main diagonal in the cross-attention map; outputs equal the inputs.",
    fix="tgt[i, 1:L + 1] = seq.flip(0).",
    lesson="Step 0; Step 7 'If you instead see a bright main diagonal'.",
    assignments=(REVERSAL.name,),
    mechanism="make_batch's targets measured to copy the source in order for >= 90% of samples",
)


def diagnose(ev):
    c = ev.failed("data")
    if not c:
        return None
    m = c["measured"] or {}
    if not m.get("n") or m.get("copied", 0) < 0.9 * m["n"]:
        return None
    return Finding(0.95, [say(c)], c.get("location"), explains=("data", "decode-accuracy"))
