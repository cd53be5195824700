from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="missing-sqrt-dk",
    title="Scores not divided by sqrt(d_k): the softmax saturates",
    what="Attention scores are Q @ K^T without the division by sqrt(d_k).",
    why="q.k has standard deviation sqrt(d_k); unscaled, softmax rows become nearly one-hot at initialisation and "
        "their gradient vanishes (0.9999939 and 6e-6 at a gap of 12).",
    symptom="The largest attention weight per row is far above the reference's ~0.5 at init; training is slower.",
    fix="scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k).",
    lesson="Debugging table, row 3; Step 2 'The division by sqrt(d_k)'.",
    mechanism=("the scores' spread measured against d_k with the same projections (ratio > 2: unscaled), or the "
               "scores' matmul located feeding the saturated softmax; rows that are not distributions over the keys "
               'exclude it'),
    observed=(Observed("attn-saturation", "data.scale.ratio", above=2.0), Observed("attn-saturation", "location"),
              Observed("block-saturation", "location")),
)


def diagnose(ev):
    c = ev.failed("attn-saturation" if ev.assignment == REVERSAL.name else "block-saturation")
    if not c or ev.failed("attn-rows-sum") or ev.failed("block-rows-sum"):
        return None
    scale = (c.get("data") or {}).get("scale")
    if ev.assignment == REVERSAL.name and scale:
        # measured directly: the scores' spread against d_k with the same projections (the mechanism)
        if scale.get("ratio", 0) <= 2.0:
            return None          # the scores are scaled: the saturation comes from elsewhere
        return Finding(0.9, [say(c), "mechanism: " + ev.mechanism(c["id"]).get("text", "")], c.get("location"),
                       explains=("brief-training", "overfit"))
    # otherwise: the scores' matmul found feeding the saturated softmax
    return Finding(0.85 if c.get("location") else 0.6, [say(c)], c.get("location"),
                   explains=("brief-training", "overfit"))
