from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="gradients-not-zeroed",
    title="Gradients are never zeroed: each step uses the sum of all earlier gradients",
    what="train() calls loss.backward() and optimizer.step() without optimizer.zero_grad() (or "
         "model.zero_grad()) in between, so .grad keeps accumulating across steps.",
    why="From the second step on, the update follows stale gradients of earlier batches, growing without bound; "
        "training stalls or diverges.",
    symptom="The loss falls for a few steps, then stalls or explodes.",
    mechanism="At each optimizer step of the student's train(), .grad is compared with the gradient of that "
              "step's own backward pass: it is larger and points elsewhere (earlier gradients are still in it).",
    fix="Call optimizer.zero_grad() (set_to_none=True by default) at the start of every step, before "
        "loss.backward().",
    lesson="Step 5 training loop: zero_grad, backward, clip, step.",
    assignments=(REVERSAL.name,),
    observed=(Observed("train-zero-grad", values=("accumulates",)),),
)


def diagnose(ev):
    c = ev.failed("train-zero-grad")
    if not c or ev.mechanism("train-zero-grad").get("kind") != "accumulates":
        return None
    return Finding(0.9, [say(c), "mechanism: " + ev.mechanism("train-zero-grad")["text"]], c.get("location"),
                   explains=("train-zero-grad", "brief-training", "decode-accuracy", "overfit"))
