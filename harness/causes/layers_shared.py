from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="layers-shared",
    title="The layers of a stack are one module (or share parameters)",
    what="A list of layers holds the same module several times, e.g. nn.ModuleList([EncoderLayer(...)] * n): "
         "[x] * n repeats one object, it does not build n layers.",
    why="Every layer then applies the same weights: the model has a fraction of its parameters and the depth "
        "the lesson's table assumes is gone. It still trains a little, so nothing behavioural fails.",
    symptom="Two entries of one ModuleList/Sequential are the same object or share a parameter.",
    fix="Build each layer anew: nn.ModuleList([EncoderLayer(...) for _ in range(num_layers)]).",
    lesson="Step 7 'Stacking layers'.",
    mechanism="the stack's entries measured to be one object, or to hold one Parameter between two of them",
    observed=(Observed("distinct-layers", values=("shared",)),),
)


def diagnose(ev):
    c = ev.failed("distinct-layers")
    mech = ev.mechanism("distinct-layers")
    if not c or mech.get("kind") != "shared":
        return None
    return Finding(0.9, [say(c), "mechanism: " + mech["text"]], c.get("location"))
