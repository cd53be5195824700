from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="data-digits-missing",
    title="make_batch never draws some digits",
    what="The sampler's range leaves out digits: numpy's and torch's randint(low, high) exclude high, so "
         "randint(0, 9) draws 0-8 only (Python's random.randint includes it).",
    why="The model never sees the missing digit, never learns to emit it, and fails on every test sequence "
        "that contains it, however well training goes.",
    symptom="Training loss looks fine; exact-match accuracy is low on sequences with the missing digit and the "
            "model never outputs it.",
    mechanism="Over ~1,800 source digits from make_batch, a digit 0-9 never appears.",
    fix="Sample the digits with an exclusive upper bound of 10: torch.randint(0, 10, (L,)) or "
        "np.random.randint(0, 10, size=L).",
    lesson="Step 0: sources are random digits 0-9.",
    assignments=(REVERSAL.name,),
    observed=(Observed("data-digits", "data.missing"),),
)


def diagnose(ev):
    c = ev.failed("data-digits")
    if not c or not (c.get("data") or {}).get("missing"):
        return None
    return Finding(0.85, [say(c)], c.get("location"), explains=("data-digits", "decode-accuracy"))
