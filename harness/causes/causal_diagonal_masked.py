from ..assignments import BLOCK, REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="causal-diagonal-masked",
    title="Causal mask hides the diagonal too",
    what="torch.triu(..., diagonal=0) as the blocked part (or torch.tril(..., diagonal=-1) as the allowed part) "
         "masks position i from itself; the strict upper triangle needs diagonal=1.",
    why="Each position loses itself; the first position has nothing left to attend to and with -inf its row "
        "becomes NaN.",
    symptom="The first row of the causal weights is NaN, or (masked with -1e9) uniform over every key, later ones "
            "included; the diagonal is 0.",
    mechanism="The weights that multiply V give every position after the first only strictly earlier keys, and "
              "the first position, with no key allowed, weight on later keys.",
    fix="torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1) as the blocked part (or torch.tril(ones) "
        "with diagonal=0 as the allowed part): a position sees itself and the past.",
    lesson="Exercise: 'position i can only attend to positions j <= i'.",
    assignments=(BLOCK.name, REVERSAL.name),
    observed=(Observed("causal-leak", values=("diagonal-masked",)), Observed("block-causal", "data.kind", ("diagonal",))),
)


def diagnose(ev):
    c = ev.failed("block-causal")
    if c and (c.get("data") or {}).get("kind") == "diagonal":
        return Finding(0.9, [say(c)], c.get("location"), explains=("block-causal", "block-lm"))
    c, mech = ev.failed("causal-leak"), ev.mechanism("causal-leak")
    if ev.weights_not_over_keys() or not c or mech.get("kind") != "diagonal-masked":
        return None
    # row 0 spreads its weight over every key: the later keys of a decoding prefix, and PAD keys when the
    # PAD weight was seen in the decoder self-attention
    return Finding(0.85, [say(c), "mechanism: " + mech["text"]], c.get("location"),
                   explains=("causal-leak", "first-loss", "brief-training", "decode-accuracy", "decode-consistency")
                   + ev.padding_from_decoder_self_attention())
