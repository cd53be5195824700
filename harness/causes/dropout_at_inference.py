from ..assignments import BLOCK, REVERSAL
from .base import RANDOM_FORWARD_UNRELIABLE as COMPARISONS
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="dropout-at-inference",
    title="Dropout stays on after model.eval(): outputs are random at inference",
    what="A dropout is applied regardless of the model's mode: F.dropout(x, p) (whose training argument defaults "
         "to True), F.dropout(..., training=True), F.scaled_dot_product_attention(..., dropout_p=p) without "
         "'if self.training else 0.0', or a hand-written mask drawn in forward().",
    why="Evaluation and generation are noisy and never reproducible; every comparison of two outputs (and every "
        "test built on one) fails at random.",
    symptom="Two eval-mode forward passes of the same batch give different logits.",
    mechanism="The first op whose output differs between two eval-mode passes is a dropout (a dropout op, or a "
              "fused attention kernel given dropout_p > 0).",
    observed=(Observed("eval-determinism", values=("dropout",)),
              Observed("block-permutation", "data.mechanism.draw", ("dropout",)),
              Observed("decode-eval", "status", ("fail",))),
    fix="Use an nn.Dropout module (it follows model.train()/model.eval()), or pass training=self.training to "
        "F.dropout.",
    lesson="Step 2/3: nn.Dropout modules; greedy_decode calls model.eval().",
    assignments=(REVERSAL.name, BLOCK.name),
)

FUSED_FIX = ("Pass dropout_p=self.dropout if self.training else 0.0 to the fused attention call (its dropout does "
             "not follow model.eval()), or keep an nn.Dropout module for the weights.")


def _finding(c: dict, mech: dict, explains: tuple) -> Finding:
    return Finding(0.9, [say(c), "mechanism: " + mech["text"]], c.get("location"), explains=explains,
                   fix=FUSED_FIX if mech.get("fused") else None)


def diagnose(ev):
    c = ev.get("eval-determinism")
    if c and c["status"] == "fail" and ev.mechanism("eval-determinism").get("kind") == "dropout":
        return _finding(c, ev.mechanism("eval-determinism"), ("eval-determinism",) + COMPARISONS)
    c = ev.failed("block-permutation")
    if c and ev.mechanism("block-permutation").get("draw") == "dropout":
        # two passes of the same tokens differ, and the first op that differs is a dropout
        return _finding(c, ev.mechanism("block-permutation"), ("block-permutation",))
    d = ev.failed("decode-eval")
    if d:   # observed: the model stays in train mode through greedy_decode, so its dropout runs there
        return Finding(0.85, [say(d), "mechanism: greedy_decode never switches the model to eval mode"],
                       d.get("location"), explains=("decode-eval", "decode-determinism", "decode-accuracy"),
                       fix="Call model.eval() at the start of greedy_decode (and model.train() again before "
                           "training resumes).")
    return None
