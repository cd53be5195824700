from ..assignments import BLOCK
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="positional-encoding-formula",
    title="Positional encoding does not follow the formula",
    what="The sinusoidal table has the wrong exponent (i instead of 2i/d) or sin and cos in the wrong columns.",
    why="The encoding still varies with position, so nothing errors, but the relative-position structure the "
        "model relies on is wrong.",
    symptom="The table differs from PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...).",
    fix="div = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model)); "
        "pe[:, 0::2] = sin(pos * div); pe[:, 1::2] = cos(pos * div).",
    lesson="Step 1 'what you must not get wrong is the exponent 2i/d'.",
    mechanism=("the table built by the student's code compared channel by channel with the sin/cos table (channels "
               'in another order pass; the right rows at the wrong positions and an overwritten table are other '
               'causes)'),
    observed=(Observed("pe-formula", "status", ("fail",)),),
)


def diagnose(ev):
    c = ev.failed("pe-formula")
    if not c or (c.get("data") or {}).get("kind") in ("indexing", "overwritten"):
        return None          # the right rows at the wrong positions: not the formula (the catch-all says where)
    if ev.assignment == BLOCK.name:
        return Finding(0.9, [say(c)], c.get("location"), explains=("pe-relative",))
    return Finding(0.9, [say(c)], c.get("location"))
