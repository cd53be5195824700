from ..assignments import BLOCK
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="causal-flag-ignored",
    title="The block masks the future even when causal is False",
    what="TransformerBlock applies the causal mask whatever its causal flag says (the flag is never read, "
         "or passed on as True).",
    why="An encoder block (causal=False) must let every position see every other: with the mask always on, "
        "bidirectional uses of the block lose the right-hand context.",
    symptom="With causal=False, earlier outputs do not change when a later token changes.",
    fix="Read the flag where the mask is built: `if causal:` around the masking, and pass the block's flag "
        "(the constructor's, or forward's when given) to the attention.",
    lesson="The exercise: a boolean causal flag.",
    assignments=(BLOCK.name,),
    mechanism="with the flag off, later outputs follow earlier tokens while earlier outputs are measured blind "
              "to later ones (the mask is applied regardless of the flag)",
    observed=(Observed("block-causal-off", values=("flag-ignored",)),),
)


def diagnose(ev):
    c = ev.failed("block-causal-off")
    mech = ev.mechanism("block-causal-off")
    if not c or mech.get("kind") != "flag-ignored":
        return None
    return Finding(0.9, [say(c), "mechanism: " + mech["text"]], c.get("location"),
                   explains=("block-permutation", "block-saturation", "block-lm"))
