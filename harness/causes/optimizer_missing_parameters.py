from ..assignments import LM, REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="optimizer-missing-parameters",
    title="The optimizer does not hold every parameter: part of the model never trains",
    what="The optimizer is built over a subset of the parameters (e.g. model.generator.parameters(), or a list "
         "assembled by hand that misses modules), so the rest keeps its initial values. In a model (lm), the same "
         "happens when layers are kept in a plain Python list or dict instead of nn.ModuleList / nn.ModuleDict: "
         "nn.Module does not register them, so model.parameters(), and any optimizer built over it, misses them.",
    why="Gradients reach the left-out parameters but nothing ever applies them: the embeddings or layers stay "
        "random and the model cannot learn the task.",
    symptom="The loss falls a little, then stalls far above what the model can reach.",
    mechanism="At the first optimizer step of the student's train(), trainable parameters of the model are in no "
              "param group of the optimizer that steps. lm: tensors the model's forward pass trains through (the "
              "leaves of autograd's graph) are not in model.parameters() (check lm-parameters).",
    fix="Build the optimizer over model.parameters() (or param groups that together cover every parameter).",
    lesson="Step 5: Adam(model.parameters(), ...).",
    assignments=(REVERSAL.name, LM.name),
    observed=(Observed("train-optimizer-params", "status", ("fail",)), Observed("lm-parameters", "status", ("fail",))),
)
LM_CHECK = "lm-parameters"
LM_FIX = ("Hold the blocks in nn.ModuleList (nn.ModuleDict for a dict, nn.Parameter for a tensor) at the line shown: "
          "nn.Module then registers them, and model.parameters() (the optimizer's) holds them.")
LM_COST = ("what it costs: the course's tests load weights and compare one forward pass, which works with the "
           "blocks in a plain list; AdamW(model.parameters()) then never updates them")


def diagnose(ev):
    if ev.failed(LM_CHECK):
        return _lm(ev)
    c = ev.failed("train-optimizer-params")
    if not c or ev.mechanism("train-optimizer-params").get("kind") == "other-model":
        return None          # none of them: train() trains another model; the catch-all says so
    return Finding(0.9, [say(c)], c.get("location"),
                   explains=("train-optimizer-params", "brief-training", "decode-accuracy"))


def _lm(ev):
    c = ev.failed(LM_CHECK)
    if not c:
        return None
    return Finding(0.9, [say(c), LM_COST], c.get("location"), explains=(LM_CHECK, "lm-training"), fix=LM_FIX,
                   component="lm")      # lm: the component the diagnosis is about
