from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="missing-residual",
    title="Residual connection missing",
    what="A sublayer's output replaces x instead of being added to it (norm(sublayer(x)) instead of "
         "norm(x + sublayer(x))).",
    why="The residual path carries the input and the gradient through the stack; without it, information and "
        "gradient must pass through every sublayer.",
    symptom="Training is much slower; a single batch cannot be memorised.",
    fix="x = self.n1(x + self.drop(a)); x = self.n2(x + self.drop(self.ff(x))).",
    lesson="Step 3 'The residual connection x + sublayer(x) is what makes depth trainable'.",
    mechanism=("with the layer's Linear weights zeroed, its output no longer depends on its input: no additive path "
               'from input to output'),
    observed=tuple(Observed(cid, "status", ("fail",)) for cid in ("residual-enc", "residual-dec", "block-residual")),
)


def diagnose(ev):
    ids = ("residual-enc", "residual-dec") if ev.assignment == REVERSAL.name else ("block-residual",)
    bad = [ev.failed(i) for i in ids if ev.failed(i)]
    if not bad:
        return None
    lines = [say(c) for c in bad]
    if ev.failed("overfit"):
        lines.append(say(ev.failed("overfit")))
    return Finding(0.9, lines, bad[0].get("location"), explains=ids + ("overfit", "brief-training",
                                                                        "decode-accuracy", "block-lm"))
