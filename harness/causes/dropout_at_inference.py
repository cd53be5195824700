from ..assignments import REVERSAL
from .base import RANDOM_FORWARD_UNRELIABLE as COMPARISONS
from .base import Cause, Finding, say

CAUSE = Cause(
    id="dropout-at-inference",
    title="Dropout stays on after model.eval(): outputs are random at inference",
    what="A dropout is applied regardless of the model's mode: F.dropout(x, p) (whose training argument defaults "
         "to True), F.dropout(..., training=True), or a hand-written mask drawn in forward().",
    why="Evaluation and generation are noisy and never reproducible; every comparison of two outputs (and every "
        "test built on one) fails at random.",
    symptom="Two eval-mode forward passes of the same batch give different logits.",
    mechanism="The first op whose output differs between two eval-mode passes is a dropout.",
    fix="Use an nn.Dropout module (it follows model.train()/model.eval()), or pass training=self.training to "
        "F.dropout.",
    lesson="Step 2/3: nn.Dropout modules; greedy_decode calls model.eval().",
    assignments=(REVERSAL.name,),
)



def diagnose(ev):
    c = ev.get("eval-determinism")
    if c and c["status"] == "fail" and ev.mechanism("eval-determinism").get("kind") == "dropout":
        return Finding(0.9, [say(c), "mechanism: " + ev.mechanism("eval-determinism")["text"]], c.get("location"),
                       explains=("eval-determinism",) + COMPARISONS)
    d = ev.failed("decode-eval")
    if d:   # observed: the model stays in train mode through greedy_decode, so its dropout runs there
        return Finding(0.85, [say(d), "mechanism: greedy_decode never switches the model to eval mode"],
                       d.get("location"), explains=("decode-eval", "decode-determinism", "decode-accuracy"),
                       fix="Call model.eval() at the start of greedy_decode (and model.train() again before "
                           "training resumes).")
    return None
