from .base import Cause, Finding, say

CAUSE = Cause(
    id="causal-diagonal-masked",
    title="Causal mask hides the diagonal too",
    what="torch.triu(..., diagonal=0) masks position i from itself; the strict upper triangle needs diagonal=1.",
    why="Each position loses itself; the first position has nothing left to attend to and with -inf its row "
        "becomes NaN.",
    symptom="The first row of the causal weights is NaN (or the diagonal is 0).",
    fix="torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1) as the blocked part.",
    lesson="Exercise: 'position i can only attend to positions j <= i'.",
    assignments=("block",),
)


def diagnose(ev):
    c = ev.failed("block-causal")
    if not c or (c.get("data") or {}).get("kind") != "diagonal":
        return None
    return Finding(0.9, [say(c)], c.get("location"), explains=("block-causal", "block-lm"))
