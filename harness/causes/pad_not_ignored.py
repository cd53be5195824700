from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="pad-not-ignored",
    title="The loss counts PAD targets",
    what="cross_entropy without ignore_index=PAD (or without masking the padded positions).",
    why="The model is trained to predict padding after EOS, which dilutes the loss and rewards a trivial task.",
    symptom="Loss looks better than the model is; gradient comes from PAD positions.",
    fix="F.cross_entropy(logits.reshape(-1, VOCAB), tgt_out.reshape(-1), ignore_index=PAD).",
    lesson="Step 5 train() 'ignore_index=PAD'.",
    assignments=(REVERSAL.name,),
    mechanism="the student's loss measured to change when the logits at PAD labels change",
    observed=(Observed("train-pad-ignored", "status", ("fail",)),),
)


def diagnose(ev):
    c = ev.failed("train-pad-ignored")
    if not c:
        return None
    return Finding(0.9, [say(c)], c.get("location"))
