from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="decode-stops-early",
    title="greedy_decode stops the whole batch when one row ends",
    what="The decoding loop's stop test looks at one row (`next_token[0] == EOS`, `.item()`) or at any row "
         "(`.any()` where `.all()` is meant), so it breaks out while other rows are still generating.",
    why="Longer sequences in a batch are cut short: batched evaluation under-reports accuracy, and generation "
        "depends on which sequences happen to share a batch. Training never shows it.",
    symptom="Accuracy lower when decoding in batches than one sequence at a time; outputs of uneven lengths "
            "truncated to the shortest.",
    mechanism="Rows of a batch decoded together stop, without EOS, at the step another row ended; the same "
              "sources decoded alone go on.",
    fix="Track which rows are finished (done |= next_token == EOS) and stop when done.all(); keep generating "
        "(and ignore the output of) rows that have ended.",
    lesson="Step 5 greedy_decode.",
    assignments=(REVERSAL.name,),
    observed=(Observed("decode-batch-rows", "data.kind", ("stops-early",)),),
)


def diagnose(ev):
    c = ev.failed("decode-batch-rows")
    if not c or (c.get("data") or {}).get("kind") != "stops-early":
        return None
    return Finding(0.85, [say(c)], c.get("location"), explains=("decode-batch-rows", "decode-accuracy"))
