from ..assignments import REVERSAL
from .base import Cause, Observed, padding_finding

CAUSE = Cause(
    id="padding-mask-missing",
    title="Padding not masked: attention reads PAD tokens",
    what="An attention layer attends to PAD positions: the padding mask is not built, not passed, or not applied "
         "to the scores (for nn.MultiheadAttention: key_padding_mask not given, or given with the wrong meaning).",
    why="The same sentence gives different outputs depending on how much padding the batch adds; training "
        "learns from noise in the padding and results change with the batch.",
    symptom="A sequence gives different outputs alone and padded inside a longer batch.",
    mechanism="In the padded batch, the attention weights that multiply V give PAD keys a non-zero share of the "
              "real queries' weight.",
    fix="Build padding_mask(src) = (src != PAD) and apply it to every attention over the source (encoder "
        "self-attention and cross-attention), and combine it with the causal mask in the decoder: "
        "scores.masked_fill(~mask, -1e9) before the softmax.",
    lesson="Step 4 padding_mask; Step 2 masked_fill.",
    assignments=(REVERSAL.name,),
    observed=(Observed("padding-invariance", values=("missing",)),),
)


def diagnose(ev):
    return padding_finding(ev, "missing")
