from ..assignments import BLOCK
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="causal-mask-inverted",
    title="Causal mask inverted: each position sees the future and not the past",
    what="The target mask keeps the upper triangle (triu) instead of the lower (tril), or the causal mask is "
         "negated.",
    why="Training can copy the answer from later positions, so the loss looks excellent; at generation there is "
        "no future to copy from.",
    symptom="Training loss excellent, generation garbage; the leakage test fails; later outputs ignore earlier "
            "tokens.",
    fix="Build the causal part with torch.tril (True on and below the diagonal = allowed); print the mask and run "
        "the leakage test.",
    mechanism="The weights that multiply V in the decoder self-attention give each row's weight to later keys and "
              "none to earlier ones.",
    lesson="Debugging table, row 2.",
    observed=(Observed("causal-leak", values=("inverted",)), Observed("block-causal", "data.kind", ("inverted",))),
)


def diagnose(ev):
    if ev.assignment == BLOCK.name:
        c = ev.failed("block-causal")
        if c and (c.get("data") or {}).get("kind") == "inverted":
            return Finding(0.9, [say(c)], c.get("location"), explains=("block-causal", "block-lm"))
        return None
    c = ev.failed("causal-leak")
    if ev.weights_not_over_keys() or not c or ev.failed("heads-permutation") or \
            ev.mechanism("causal-leak").get("kind") != "inverted":
        return None
    return Finding(0.9, [say(c), "mechanism: " + ev.mechanism("causal-leak")["text"]], c.get("location"),
                   explains=("causal-leak", "first-loss", "brief-training", "decode-accuracy", "decode-consistency")
                   + ev.padding_from_decoder_self_attention())
