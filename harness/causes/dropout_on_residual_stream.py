from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="dropout-on-residual-stream",
    title="Dropout is applied to the whole residual stream, not to the sublayer's output",
    what="The dropout wraps the residual add and the norm (x = dropout(norm(x + sublayer(x)))) instead of the "
         "sublayer's output alone (x = norm(x + dropout(sublayer(x)))): in training a share p of the stream, the "
         "token's own representation included, is set to 0 at every layer.",
    why="The skip path is what carries each token's information and the gradient through the stack; dropping it "
        "at every layer of every step destroys information the next layer needs and makes training noisy and "
        "slow. Evaluation looks right, since dropout is off there, so nothing points at it.",
    symptom="With its sublayers adding nothing, the layer's output in train mode differs from eval mode.",
    mechanism="With every Linear of the layer zeroed (its sublayers output 0), its train-mode output differs from "
              "its eval-mode output, and a dropout op in it drops a non-zero tensor of the stream's shape: the "
              "stream itself (check residual-train).",
    fix="Apply the dropout to the sublayer's output before the residual add: x = norm(x + dropout(sublayer(x))) "
        "(post-norm) or x = x + dropout(sublayer(norm(x))) (pre-norm).",
    lesson="x = self.n1(x + self.drop(a))            # residual, then normalise",
    assignments=(REVERSAL.name,),
    observed=(Observed("residual-train", "data.mechanism.kind", ("stream-dropped",)),),
)


def diagnose(ev):
    c = ev.failed("residual-train")
    if not c or ev.mechanism("residual-train").get("kind") != "stream-dropped":
        return None          # the symptom alone: the catch-all reports it with the measured evidence
    return Finding(0.9, [say(c)], c.get("location"), explains=("residual-train",))
