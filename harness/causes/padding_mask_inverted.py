from .base import Cause, Finding, say

CAUSE = Cause(
    id="padding-mask-inverted",
    title="Padding mask inverted: attention goes to PAD and not to the real tokens",
    what="The padding mask marks the padding as the allowed positions (x == pad where x != pad is meant), or "
         "is applied with the opposite convention from the one it was built with.",
    why="Real tokens are hidden and the model reads padding instead; outputs change with the amount of padding.",
    symptom="A sequence gives different outputs alone and padded inside a longer batch.",
    fix="padding_mask: (x != pad).unsqueeze(1).unsqueeze(2) (True = real), applied with "
        "masked_fill(~mask, -1e9); or one consistent opposite convention everywhere.",
    lesson="Step 4 padding_mask; Step 2 masked_fill.",
    assignments=("reversal",),
)


def diagnose(ev):
    c = ev.failed("padding-invariance")
    if not c or ev.failed("attn-rows-sum") or ev.failed("heads-permutation") or ev.failed("stateless-forward"):
        return None
    return Finding(0.8, [say(c)], c.get("location"), explains=("padding-invariance", "overfit"))
