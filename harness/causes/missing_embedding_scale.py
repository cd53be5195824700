from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="missing-embedding-scale",
    title="Token embeddings not multiplied by sqrt(d_model)",
    what="The embedding goes into the positional encoding without * math.sqrt(d_model).",
    why="Xavier-initialised embeddings have std ~0.17 while the positional table spans [-1, 1]: position "
        "dominates early training.",
    symptom="Token-to-position scale ratio 1 instead of 8 (d_model = 64).",
    fix="x = self.pos(self.src_emb(src) * math.sqrt(self.d_model)) (and the same for the target).",
    lesson="Step 4 'The * math.sqrt(self.d_model) on the embeddings'.",
    assignments=(REVERSAL.name,),
    mechanism="the embedding's output reaches the positional encoding multiplied by 1: no sqrt(d_model) (or "
              "other) scale between the lookup and the added table",
    observed=(Observed("embedding-scale", values=("no-scale",)),),
)


def diagnose(ev):
    c = ev.failed("embedding-scale")
    mech = ev.mechanism("embedding-scale")
    if not c or mech.get("kind") != "no-scale":
        return None     # the small ratio alone (an init choice) is the catch-all's, below 0.5
    return Finding(0.85, [say(c), "mechanism: " + mech["text"]], c.get("location"))
