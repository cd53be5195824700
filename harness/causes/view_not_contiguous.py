from .base import Cause, Finding, say

CAUSE = Cause(
    id="view-not-contiguous",
    title="view() straight after transpose",
    what="A tensor is transposed and then reshaped with .view(), which needs contiguous memory.",
    why="After transpose the memory layout no longer matches the new shape; view() refuses.",
    symptom='RuntimeError: "view size is not compatible with input tensor\'s size and stride ... Use .reshape".',
    fix="Insert .contiguous() before .view(), or use .reshape().",
    lesson="Debugging table, row 6.",
    mechanism="the exception itself: .view() on a non-contiguous tensor raised in the student's code",
)


def diagnose(ev):
    errs = ev.errors_matching("view size is not compatible", "not contiguous", "contiguous subspace")
    if not errs:
        return None
    c = errs[0]
    # a check that records the exception in its data (long inputs) fails for the same reason
    same = tuple(k for k, v in ev.by_id.items() if "contiguous" in str((v.get("data") or {}).get("error", "")).lower())
    return Finding(0.95, [say(c)], c.get("location"), explains=tuple(e["id"] for e in errs) + same)
