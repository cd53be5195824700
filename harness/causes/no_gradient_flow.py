from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="no-gradient-flow",
    title="Gradients do not reach part of the model (detach or no_grad)",
    what="An input, an embedding or the encoder output is detached or computed under torch.no_grad().",
    why="Parameters before the cut never receive a gradient, so they never learn.",
    symptom="grad_norm 0 for the encoder (or the whole model); loss stuck near ln V.",
    fix="Remove the .detach() / torch.no_grad() from the training path (keep no_grad only in greedy_decode).",
    lesson="Debugging table, row 4.",
    assignments=(REVERSAL.name,),
    mechanism=('a .detach(), torch.no_grad() or .data seen on the path of the parameters without gradient; without '
               'one, below 0.5'),
    observed=(Observed("gradient-flow", "data.detach_lines"),),
)


def diagnose(ev):
    c = ev.failed("gradient-flow")
    if not c or ev.failed("source-sensitivity"):
        return None  # an encoder whose output is never used gets no gradient: source-ignored explains it
    # a detach / no_grad / .data on the path is the mechanism; without one seen, the cut is elsewhere
    if (c.get("data") or {}).get("detach_lines"):
        return Finding(0.9, [say(c)], c.get("location"), explains=("overfit", "brief-training", "decode-accuracy"))
    # The symptom alone: parameters with a zero gradient but no cut seen. Other mechanisms give it too (scores
    # that do not reach the output, e.g. attention rows fully masked, give W_q and W_k exactly zero gradient).
    return Finding(0.45, [say(c), "no .detach(), torch.no_grad() or .data was seen on the path, so where the "
                                  "gradient stops is not confirmed"], c.get("location"),
                   title="Some parameters get no gradient (no detach or no_grad seen)",
                   fix="Find why these parameters do not affect the loss: a detach, an unused output, or "
                       "attention weights that do not depend on the scores.")
