from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="positional-encoding-trainable",
    title="Positional table is a trainable Parameter",
    what="The sinusoidal table is stored as nn.Parameter instead of a buffer.",
    why="A constant table should never receive gradient; as a Parameter the optimizer changes it (and it adds "
        "max_len x d_model parameters to the count).",
    symptom="Parameter count above the lesson's 235,981; the table drifts during training.",
    fix="self.register_buffer('pe', pe.unsqueeze(0)).",
    lesson="Step 1 'register_buffer rather than nn.Parameter'.",
    assignments=(REVERSAL.name,),
    mechanism='a trainable Parameter measured in the positional encoding module, with its line',
    observed=(Observed("pe-buffer", "status", ("fail",)),),
)


def diagnose(ev):
    c = ev.failed("pe-buffer")
    if not c:
        return None
    lines = [say(c)]
    pc = ev.get("param-count")
    if pc and pc["status"] != "pass":
        lines.append(say(pc))
    explains: tuple[str, ...] = ()
    f = ev.failed("pe-formula")
    if f and (f.get("data") or {}).get("kind") == "overwritten":
        # Built alone the table is right; inside the model it is not. Being a Parameter is what lets an
        # initialisation loop over model.parameters() reach it, so this cause accounts for that failure too.
        at = (f.get("location") or {}).get("line")
        lines.append(say(f) + " - as a Parameter it is reached by the model's initialisation"
                     + (f" at line {at}" if at else "") + ", which overwrites the sin/cos values")
        explains = ("pe-formula",)
    return Finding(0.9, lines, c.get("location"), explains=explains)
