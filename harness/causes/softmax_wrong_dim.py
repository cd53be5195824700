from .base import Cause, Finding, say

CAUSE = Cause(
    id="softmax-wrong-dim",
    title="Softmax over the wrong axis",
    what="softmax normalises over the queries (dim=-2) instead of the keys (dim=-1).",
    why="Each row must be one query's distribution over all keys; over the wrong axis the shapes are identical, "
        "nothing errors, and the model is meaningless (and leaks the future).",
    symptom="Attention rows do not sum to 1 over the keys; the leakage test fails.",
    fix="torch.softmax(scores, dim=-1).",
    lesson="Step 2 'dim=-1 in the softmax'.",
)


def diagnose(ev):
    c = ev.failed("attn-rows-sum" if ev.assignment == "reversal" else "block-rows-sum")
    if not c:
        return None
    return Finding(0.95, [say(c)], c.get("location"),
                   explains=("causal-leak", "attn-saturation", "padding-invariance", "first-loss", "overfit",
                             "brief-training", "decode-accuracy", "block-causal", "block-saturation", "block-lm"))
