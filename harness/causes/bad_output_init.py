from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="bad-output-init",
    title="First loss far above ln V: the output layer or its initialisation is wrong",
    what="The untrained model's logits are far too large (a scaled output layer, a huge init).",
    why="A model that has learned nothing should be near uniform (ln 13 = 2.565, ~3.3 with random logits); "
        "large random logits make it confidently wrong.",
    symptom="First-step loss far above 3.5 (e.g. 8.0).",
    fix="Leave the generator as nn.Linear(d_model, vocab) with the Xavier init; do not scale the logits.",
    lesson="Step 0 'If your first loss is 8.0, the output layer or the initialisation is wrong'.",
    assignments=(REVERSAL.name,),
    mechanism=('first loss >= 6.5 with the attention rows normal, and the output layer located as where the logits '
               'grow (unlocated: 0.6)'),
    observed=(Observed("first-loss", "location"),),
)


def diagnose(ev):
    c = ev.failed("first-loss")
    if not c or (c["measured"] or 0) < 6.5 or ev.failed("attn-rows-sum"):
        return None
    # the output layer (its oversized init or scaling) located is the mechanism
    return Finding(0.85 if c.get("location") else 0.6, [say(c)], c.get("location"))
