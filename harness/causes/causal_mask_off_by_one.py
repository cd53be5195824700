from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="causal-mask-off-by-one",
    title="Causal mask off by one: each position can see the next token",
    what="The triangle of the causal mask is shifted by one diagonal (torch.tril(..., diagonal=1), or "
         "torch.triu(..., diagonal=2) for the blocked part), so position t attends to t + 1.",
    why="Training can copy the very token it must predict from the next position: the loss looks excellent, "
        "and generation, where the next token does not exist yet, fails.",
    symptom="The leakage test fails only for the token right after each position; training loss suspiciously low.",
    mechanism="The weights that multiply V in the decoder self-attention give weight to the next key (t + 1) and "
              "none to keys further ahead.",
    fix="torch.tril(torch.ones(T, T, dtype=torch.bool)) (diagonal=0): a position sees itself and the past only.",
    lesson="Step 4 target_mask; debugging table, row 2.",
    assignments=(REVERSAL.name,),
    observed=(Observed("causal-leak", values=("off-by-one",)),),
)


def diagnose(ev):
    c = ev.failed("causal-leak")
    mech = ev.mechanism("causal-leak")
    if ev.weights_not_over_keys() or not c or mech.get("kind") != "off-by-one":
        return None
    return Finding(0.85, [say(c), "mechanism: " + mech["text"]], c.get("location"),
                   explains=("causal-leak", "first-loss", "brief-training", "decode-accuracy", "decode-consistency")
                   + ev.padding_from_decoder_self_attention())
