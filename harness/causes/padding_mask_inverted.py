from ..assignments import REVERSAL
from .base import Cause, Observed, padding_finding

CAUSE = Cause(
    id="padding-mask-inverted",
    title="Padding mask inverted: attention goes to PAD and not to the real tokens",
    what="The padding mask marks the padding as the allowed positions (x == pad where x != pad is meant), or "
         "is applied with the opposite convention from the one it was built with.",
    why="Real tokens are hidden and the model reads padding instead; outputs change with the amount of padding.",
    symptom="A sequence gives different outputs alone and padded inside a longer batch.",
    fix="padding_mask: (x != pad).unsqueeze(1).unsqueeze(2) (True = real), applied with "
        "masked_fill(~mask, -1e9); or one consistent opposite convention everywhere.",
    mechanism="In the padded batch, the attention weights that multiply V give the real queries' weight to PAD keys "
              "(over 99%) and almost none to the real tokens.",
    lesson="Step 4 padding_mask; Step 2 masked_fill.",
    assignments=(REVERSAL.name,),
    observed=(Observed("padding-invariance", values=("inverted",)),),
)


def diagnose(ev):
    return padding_finding(ev, "inverted")
