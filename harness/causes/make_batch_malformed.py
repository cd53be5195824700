from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="make-batch-malformed",
    title="make_batch does not produce SOS + reversed source + EOS, padded with PAD",
    what="The targets are not bracketed by SOS/EOS, not padded with PAD, or not the reversed source.",
    why="Every later stage trusts the data; the model learns whatever the data says.",
    symptom="Printed examples do not read as SOS, the reversed digits, EOS, then PAD.",
    fix="Follow Step 0: src[i, :L] = seq; tgt[i, 0] = SOS; tgt[i, 1:L + 1] = seq.flip(0); tgt[i, L + 1] = EOS.",
    lesson="Step 0; build-order table 'Data generation'.",
    assignments=(REVERSAL.name,),
    mechanism=("make_batch's targets measured against SOS + reversed source + EOS, sample by sample (not a plain "
               'copy)'),
    observed=(Observed("data", "status", ("fail",)),),
)


def diagnose(ev):
    c = ev.failed("data")
    if not c:
        return None
    m = c["measured"] or {}
    if m.get("n") and m.get("copied", 0) >= 0.9 * m["n"]:
        return None
    return Finding(0.8, [say(c)], c.get("location"), explains=("data",))
