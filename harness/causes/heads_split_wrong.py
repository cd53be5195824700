from ..assignments import REVERSAL
from .base import Cause, Finding, say

CAUSE = Cause(
    id="heads-split-wrong",
    title="Heads reshaped without the transpose: positions are mixed",
    what="x.view(B, h, T, d_k) (or merging back without transposing) instead of "
         "x.view(B, T, h, d_k).transpose(1, 2).",
    why="The reshape silently interleaves positions and features: each 'head' gets slices of several "
        "positions, so attention mixes tokens it should not (and leaks the future).",
    symptom="Self-attention is no longer permutation-equivariant; the leakage test fails.",
    fix="view(B, T, h, d_k).transpose(1, 2) to split; transpose(1, 2).contiguous().view(B, T, d_model) to merge.",
    lesson="Step 2 _split.",
    mechanism=("permuting positions does not permute the attention's output, with the view that splits heads without"
               ' the transpose located in the trace (unlocated: 0.6)'),
)


def diagnose(ev):
    c = ev.failed("heads-permutation" if ev.assignment == REVERSAL.name else "block-permutation")
    if not c or ev.failed("attn-rows-sum") or ev.failed("block-rows-sum"):
        return None
    # the view that splits heads without the transpose, found in the trace, is the mechanism
    return Finding(0.9 if c.get("location") else 0.6, [say(c)], c.get("location"),
                   explains=("causal-leak", "padding-invariance", "overfit", "first-loss", "block-causal",
                             "block-lm", "source-sensitivity"))
