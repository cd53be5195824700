from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="gradients-zeroed-before-step",
    title="Gradients are zeroed between backward() and step(): the optimizer never sees them",
    what="optimizer.zero_grad() (or model.zero_grad()) is called after loss.backward() and before "
         "optimizer.step(), so every step is taken with a zero (or absent) gradient.",
    why="Nothing is learned: the parameters move only by weight decay or momentum left from nothing.",
    symptom="The loss does not fall at all.",
    mechanism="At each optimizer step of the student's train(), .grad is zero or None while that step's own "
              "backward pass produced a non-zero gradient.",
    fix="Order each step as zero_grad(), forward, loss.backward(), (clip), optimizer.step().",
    lesson="Step 5 training loop.",
    assignments=(REVERSAL.name,),
    observed=(Observed("train-zero-grad", values=("zero",)),),
)


def diagnose(ev):
    c = ev.failed("train-zero-grad")
    if not c or ev.mechanism("train-zero-grad").get("kind") != "zero":
        return None
    return Finding(0.9, [say(c), "mechanism: " + ev.mechanism("train-zero-grad")["text"]], c.get("location"),
                   explains=("train-zero-grad", "brief-training", "decode-accuracy"))
