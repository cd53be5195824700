from ..assignments import BLOCK
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="causal-mask-missing",
    title="Causal mask missing: the decoder can look at later tokens",
    what="The decoder's self-attention is not masked causally (only padding, or no mask at all).",
    why="During training each position can read the token it must predict; at generation the future does not "
        "exist yet, so what it learned does not transfer.",
    symptom="Training loss excellent, generation garbage; the leakage test fails.",
    mechanism="No causal masking reaches the decoder self-attention: the weights that multiply V give later keys "
              "non-zero weight, and no softmax of the decoder self-attention was masked either (a fused call got "
              "no causal mask).",
    fix="Combine the padding mask with torch.tril(torch.ones(T, T, dtype=torch.bool)) for the decoder's "
        "self-attention, built from the actual length each step.",
    lesson="Debugging table, row 2; Step 4 target_mask.",
    observed=(Observed("causal-leak", values=("missing",)), Observed("block-causal", "data.kind", ("missing",))),
)


def diagnose(ev):
    if ev.assignment == BLOCK.name:
        c = ev.failed("block-causal")
        if c and (c.get("data") or {}).get("kind") == "missing":
            return Finding(0.9, [say(c)], c.get("location"), explains=("block-causal", "block-lm"))
        return None
    c = ev.failed("causal-leak")
    if ev.weights_not_over_keys() or not c or ev.failed("heads-permutation") or \
            ev.mechanism("causal-leak").get("kind") != "missing":
        return None
    return Finding(0.85, [say(c), "mechanism: " + ev.mechanism("causal-leak")["text"]], c.get("location"),
                   explains=("causal-leak", "first-loss", "brief-training", "decode-accuracy", "decode-consistency")
                   + ev.padding_from_decoder_self_attention())
