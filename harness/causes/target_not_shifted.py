from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="target-not-shifted",
    title="Target not shifted right: the labels are the decoder's own input",
    what="train() gives the model tgt_in and asks it to predict the same tokens at the same positions.",
    why="Position i sees token i and is asked for token i: the model learns the identity, not the next token.",
    symptom="Loss under 0.05 within ~200 steps; greedy generation emits one token forever.",
    fix="Feed tgt[:, :-1] to the model and use tgt[:, 1:] as the labels.",
    lesson="Debugging table, row 1; Step 5 'SHIFT RIGHT'.",
    assignments=(REVERSAL.name,),
    mechanism="in the student's train(), the labels fed to the loss equal the decoder input token for token (>= 90%)",
    observed=(Observed("train-shift", "measured.label_equals_input", at_least=0.9),),
)


def diagnose(ev):
    c = ev.failed("train-shift")
    if not c or (c["measured"] or {}).get("label_equals_input") is None:
        return None
    if c["measured"]["label_equals_input"] < 0.9:
        return None
    return Finding(0.95, [say(c)], c.get("location"), explains=("brief-training", "decode-accuracy"))
