from .base import Cause, Finding, say

CAUSE = Cause(
    id="missing-embedding-scale",
    title="Token embeddings not multiplied by sqrt(d_model)",
    what="The embedding goes into the positional encoding without * math.sqrt(d_model).",
    why="Xavier-initialised embeddings have std ~0.17 while the positional table spans [-1, 1]: position "
        "dominates early training.",
    symptom="Token-to-position scale ratio 1 instead of 8 (d_model = 64).",
    fix="x = self.pos(self.src_emb(src) * math.sqrt(self.d_model)) (and the same for the target).",
    lesson="Step 4 'The * math.sqrt(self.d_model) on the embeddings'.",
    assignments=("reversal",),
)


def diagnose(ev):
    c = ev.failed("embedding-scale")
    if not c:
        return None
    return Finding(0.85, [say(c)], c.get("location"))
