from .base import Cause, Finding, say

CAUSE = Cause(
    id="causal-mask-missing",
    title="Causal mask missing: the decoder can look at later tokens",
    what="The decoder's self-attention is not masked causally (only padding, or no mask at all).",
    why="During training each position can read the token it must predict; at generation the future does not "
        "exist yet, so what it learned does not transfer.",
    symptom="Training loss excellent, generation garbage; the leakage test fails.",
    fix="Combine the padding mask with torch.tril(torch.ones(T, T, dtype=torch.bool)) for the decoder's "
        "self-attention, built from the actual length each step.",
    lesson="Debugging table, row 2; Step 4 target_mask.",
)


def diagnose(ev):
    if ev.assignment == "block":
        c = ev.failed("block-causal")
        if c and (c.get("data") or {}).get("kind") == "missing":
            return Finding(0.9, [say(c)], c.get("location"), explains=("block-causal", "block-lm"))
        return None
    c = ev.failed("causal-leak")
    if not c or ev.failed("attn-rows-sum") or ev.failed("heads-permutation"):
        return None
    if (c.get("data") or {}).get("past_fraction", 1) <= 0.2:
        return None
    return Finding(0.85, [say(c)], c.get("location"),
                   explains=("causal-leak", "first-loss", "brief-training", "decode-accuracy"))
