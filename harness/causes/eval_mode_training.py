from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="eval-mode-training",
    title="The model trains in eval mode: dropout is off while learning",
    what="train() switches the model to eval mode (model.eval(), e.g. for a validation pass) and does not switch "
         "it back with model.train() before the next training steps.",
    why="Dropout is disabled during training, so the regularisation the model was designed with is gone; "
        "batch-dependent layers use their running statistics.",
    symptom="Training looks fine or slightly too good; generalisation is worse than expected.",
    mechanism="In the student's train(), most optimizer steps follow a forward pass made with model.training "
              "False.",
    fix="Call model.train() at the start of every training step (or right after each evaluation).",
    lesson="Step 5 training loop; greedy_decode switches to eval.",
    assignments=(REVERSAL.name,),
    observed=(Observed("train-mode", "status", ("fail",)),),
)


def diagnose(ev):
    c = ev.failed("train-mode")
    if not c:
        return None
    return Finding(0.85, [say(c)], c.get("location"), explains=("train-mode",))
