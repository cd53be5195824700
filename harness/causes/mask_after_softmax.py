from ..assignments import BLOCK, REVERSAL
from .base import Cause, Finding, Observed, over_another_axis, say

CAUSE = Cause(
    id="mask-after-softmax",
    title="Mask applied after the softmax: the weights are normalised over keys that should be hidden",
    what="The attention mask zeroes weights after the softmax instead of setting the scores to -inf (or -1e9) "
         "before it.",
    why="The softmax's denominator still sums over the hidden keys (later tokens, padding), so every visible "
        "weight depends on them: the future leaks through the normalisation and rows no longer sum to 1.",
    symptom="The leakage test fails although the weights of later keys are exactly 0; attention rows sum to less "
            "than 1.",
    mechanism="A masking op (masked_fill, where, multiply) takes the softmax's output as its input, and the "
              "weights that multiply V give later keys weight 0 yet their rows do not sum to 1.",
    fix="Mask the scores before the softmax: scores.masked_fill(~mask, -1e9), then torch.softmax(scores, dim=-1).",
    lesson="Step 2: masked_fill on the scores, then softmax.",
    assignments=(REVERSAL.name, BLOCK.name),
    observed=(Observed("causal-leak", values=("after-softmax",)),
              Observed("block-causal", "data.kind", ("after-softmax",))),
)


def diagnose(ev):
    if ev.assignment == BLOCK.name:
        c = ev.failed("block-causal")
        if c and (c.get("data") or {}).get("kind") == "after-softmax":
            return Finding(0.85, [say(c)], c.get("location"), explains=("block-causal", "block-lm"))
        return None
    c = ev.failed("causal-leak")
    mech = ev.mechanism("causal-leak")
    if not c or mech.get("kind") != "after-softmax":
        return None
    explains = ["causal-leak", "first-loss", "brief-training", "decode-accuracy", "decode-consistency",
                "padding-invariance"]
    ka = ev.data("attn-rows-sum").get("key_axis") or {}
    if ka and not over_another_axis(ka):      # rows lose mass to the mask: not a softmax axis
        explains.append("attn-rows-sum")
    return Finding(0.85, [say(c), "mechanism: " + mech["text"]], c.get("location"), explains=tuple(explains))
