from ..assignments import BLOCK, REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="attention-renormalised",
    title="The weights that multiply V are not the softmax of the masked scores",
    what="After the masked softmax, the weights are transformed again before they reach V (a second softmax, "
         "a re-normalisation, an added constant), which gives hidden keys (later tokens, padding) weight again.",
    why="The mask works on the scores, but what the model actually uses ignores it: later tokens and padding "
        "leak back in, and each row's distribution is flattened.",
    symptom="The leakage test (or the padding test) fails although a correctly masked softmax is computed.",
    mechanism="A softmax of the attention's shape gives the hidden keys weight 0, while the tensor multiplied "
              "with V gives them a non-zero share.",
    fix="Multiply V by the output of the one masked softmax: attn = torch.softmax(scores.masked_fill(~mask, -1e9), "
        "dim=-1); out = attn @ V (dropout on attn is fine; a second softmax or normalisation is not).",
    lesson="Step 2: scores -> mask -> softmax -> weights @ V.",
    assignments=(REVERSAL.name, BLOCK.name),
    observed=(Observed("causal-leak", values=("renormalised",)), Observed("padding-invariance", values=("renormalised",)),
              Observed("block-causal", "data.kind", ("renormalised",))),
)


def diagnose(ev):
    if ev.assignment == BLOCK.name:
        c = ev.failed("block-causal")
        if c and (c.get("data") or {}).get("kind") == "renormalised":
            return Finding(0.8, [say(c)], c.get("location"), explains=("block-causal", "block-lm"))
        return None
    hits = [c for c in (ev.failed("causal-leak"), ev.failed("padding-invariance"))
            if c and ev.mechanism(c["id"]).get("kind") == "renormalised"]
    if ev.weights_not_over_keys() or not hits:
        return None
    lines = [x for c in hits for x in (say(c), "mechanism: " + ev.mechanism(c["id"])["text"])]
    return Finding(0.8, lines, hits[0].get("location"),
                   explains=("causal-leak", "padding-invariance", "first-loss", "brief-training", "decode-accuracy",
                             "decode-consistency",
                             "overfit"))
