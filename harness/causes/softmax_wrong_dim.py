from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, over_another_axis, say

CAUSE = Cause(
    id="softmax-wrong-dim",
    title="Softmax over the wrong axis",
    what="softmax normalises over the queries (dim=-2) instead of the keys (dim=-1).",
    why="Each row must be one query's distribution over all keys; over the wrong axis the shapes are identical, "
        "nothing errors, and the model is meaningless (and leaks the future).",
    symptom="Attention rows do not sum to 1 over the keys; the leakage test fails.",
    mechanism="The weights that multiply V sum to 1 over the queries (axis found by its length in the "
              "cross-attention) or over another axis (the heads) instead of over the keys; without observable "
              "cross-attention weights, a softmax "
              "over a dim other than the last (the usual key axis) is reported at lower confidence.",
    fix="torch.softmax(scores, dim=-1).",
    lesson="Step 2 'dim=-1 in the softmax'.",
    observed=(Observed("attn-rows-sum", "data.key_axis.over_queries_err", below=1e-4),
              Observed("attn-rows-sum", "data.key_axis.over_other_err", below=1e-4),
              Observed("block-rows-sum", "status", ("fail",))),
)


def diagnose(ev):
    c = ev.failed("attn-rows-sum" if ev.assignment == REVERSAL.name else "block-rows-sum")
    if not c:
        return None
    conf = 0.95
    if ev.assignment == REVERSAL.name:
        d = c.get("data") or {}
        ka = d.get("key_axis")
        if ka:
            if not over_another_axis(ka):
                return None          # rows lose mass some other way (a mask applied after the softmax)
        elif not any(x != -1 for x in d.get("softmax_dims") or []):
            return None
        else:
            conf = 0.7               # the key axis is assumed to be the last one: layout not confirmed
    return Finding(conf, [say(c)], c.get("location"),
                   explains=("causal-leak", "attn-saturation", "padding-invariance", "first-loss", "overfit",
                             "brief-training", "decode-accuracy", "decode-consistency", "block-causal",
                             "block-saturation", "block-lm"))
