from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="attention-shared",
    title="One attention module serves both self- and cross-attention",
    what="The decoder layer calls the same MultiHeadAttention for its self-attention and for its "
         "cross-attention (one self.attn, or self.cross_attn = self.self_attn).",
    why="Self-attention (which earlier target tokens matter) and cross-attention (which source positions to "
        "read) are different jobs; one set of projections cannot learn both well.",
    symptom="One attention module is called twice in one forward pass, once with query = key and once with "
            "keys from the encoder.",
    fix="Give the decoder layer two modules: self.self_attn = MultiHeadAttention(...) and "
        "self.cross_attn = MultiHeadAttention(...).",
    lesson="Step 6 'The decoder layer'.",
    assignments=(REVERSAL.name,),
    mechanism="the same module instance measured in both roles within one forward pass",
    observed=(Observed("distinct-attention", values=("shared",)),),
)


def diagnose(ev):
    c = ev.failed("distinct-attention")
    mech = ev.mechanism("distinct-attention")
    if not c or mech.get("kind") != "shared":
        return None
    return Finding(0.9, [say(c), "mechanism: " + mech["text"]], c.get("location"))
