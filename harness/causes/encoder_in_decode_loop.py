from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="encoder-in-decode-loop",
    title="greedy_decode re-runs the encoder at every step",
    what="model.encode(...) is called inside the generation loop.",
    why="The source does not change while decoding; recomputing the memory each step is pure waste "
        "(T times the encoder cost).",
    symptom="Generation much slower than needed; the encoder runs once per generated token.",
    fix="memory = model.encode(src, src_mask) once, before the loop.",
    lesson="Step 6 'The encoder runs once, outside the loop'.",
    assignments=(REVERSAL.name,),
    mechanism='model.encode counted: called more than once per greedy_decode',
    observed=(Observed("decode-encoder-calls", "status", ("fail",)),),
)


def diagnose(ev):
    c = ev.failed("decode-encoder-calls")
    if not c:
        return None
    return Finding(0.9, [say(c)], c.get("location"))
