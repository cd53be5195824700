from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

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
    mechanism=("a reshape of the attention's forward pass, replayed on token indices, puts a token's values at "
               "another token (the split or merge that mixes positions, located); the reshapes measured to keep "
               "every token's values, or a forward pass that is random, rule it out; no reshape measured: 0.6"),
    observed=(Observed("heads-permutation", values=("positions-mixed",)),
              Observed("block-permutation", values=("positions-mixed",))),
)

EXPLAINS = ("causal-leak", "padding-invariance", "overfit", "first-loss", "block-causal", "block-lm",
            "source-sensitivity")


def diagnose(ev):
    cid = "heads-permutation" if ev.assignment == REVERSAL.name else "block-permutation"
    c = ev.failed(cid)
    if not c or ev.failed("attn-rows-sum") or ev.failed("block-rows-sum"):
        return None
    mech = ev.mechanism(cid)
    if ev.observed(CAUSE):      # the reshape that moves a token's values to another token: the mechanism
        return Finding(0.9, [say(c), "mechanism: " + mech["text"]], c.get("location"), explains=EXPLAINS)
    if mech.get("kind") in ("positions-kept", "random"):
        return None             # measured: the heads keep their tokens, or the pass is random (not the layout)
    # the symptom alone: where the heads' values land was not measured (no reshape seen, or an older payload)
    return Finding(0.6, [say(c), "where the heads' values land was not measured (no reshape of a tensor with a "
                                 "token axis was seen), so the head layout is a guess from the symptom"],
                   c.get("location"), explains=EXPLAINS,
                   title="Self-attention is not permutation-equivariant (the head layout was not measured)")
