from ..assignments import REVERSAL
from .base import Cause, Finding, say

CAUSE = Cause(
    id="optimizer-missing-parameters",
    title="The optimizer does not hold every parameter: part of the model never trains",
    what="The optimizer is built over a subset of the parameters (e.g. model.generator.parameters(), or a list "
         "assembled by hand that misses modules), so the rest keeps its initial values.",
    why="Gradients reach the left-out parameters but nothing ever applies them: the embeddings or layers stay "
        "random and the model cannot learn the task.",
    symptom="The loss falls a little, then stalls far above what the model can reach.",
    mechanism="At the first optimizer step of the student's train(), trainable parameters of the model are in no "
              "param group of the optimizer that steps.",
    fix="Build the optimizer over model.parameters() (or param groups that together cover every parameter).",
    lesson="Step 5: Adam(model.parameters(), ...).",
    assignments=(REVERSAL.name,),
)


def diagnose(ev):
    c = ev.failed("train-optimizer-params")
    if not c or ev.mechanism("train-optimizer-params").get("kind") == "other-model":
        return None          # none of them: train() trains another model; the catch-all says so
    return Finding(0.9, [say(c)], c.get("location"),
                   explains=("train-optimizer-params", "brief-training", "decode-accuracy"))
