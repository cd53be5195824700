from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="dropout-on-masked-scores",
    title="Dropout is applied to the masked scores before the softmax: masked positions leak in training",
    what="The attention dropout is applied to the scores after the mask is filled in and before the softmax "
         "(softmax(dropout(scores.masked_fill(~mask, -1e9)))). Dropout sets a share p of the entries to 0, the "
         "masked -1e9 ones included, and a masked score of 0 is an ordinary logit: the softmax gives that future "
         "(or padded) key real weight.",
    why="In training the decoder sees some of the tokens it must predict, so it learns to rely on them; at "
        "generation they do not exist. Evaluation shows nothing, since dropout is off there: the eval-mode "
        "leakage test passes.",
    symptom="In train mode, with the same dropout masks, an earlier output changes when a later decoder token "
            "changes.",
    mechanism="The train-mode leakage test fails (check causal-leak-train) and a dropout op in the forward pass "
              "outputs masked scores (values of -1e4 or less next to zeroed entries): the mask was applied before "
              "the dropout, which zeroes masked entries.",
    fix="Apply the dropout to the attention weights after the softmax: attn = self.dropout(torch.softmax(scores, "
        "dim=-1)); a masked weight is exactly 0 there and stays 0.",
    lesson="attn = self.dropout(torch.softmax(scores, dim=-1))         # normalise over keys",
    assignments=(REVERSAL.name,),
    observed=(Observed("causal-leak-train", "data.mechanism.kind", ("dropout-on-masked-scores",)),),
)


def diagnose(ev):
    c = ev.failed("causal-leak-train")
    if not c or ev.mechanism("causal-leak-train").get("kind") != "dropout-on-masked-scores":
        return None          # the symptom alone: the catch-all reports it with the measured evidence
    return Finding(0.9, [say(c)], c.get("location"), explains=("causal-leak-train",))
