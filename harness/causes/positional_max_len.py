from ..assignments import REVERSAL
from .base import Cause, Finding, say

CAUSE = Cause(
    id="positional-max-len",
    title="Positional table too short for the sequences",
    what="The positional-encoding table is built for fewer positions than the model is used with (max_len "
         "ignored or too small).",
    why="x + pe[:, :T] fails (or silently broadcasts wrongly) as soon as T exceeds the table.",
    symptom="Works at length 6, fails at length 30.",
    fix="Build PositionalEncoding(d_model, max_len) with the model's max_len (64 here, or more than the longest "
        "sequence you will feed).",
    lesson="Debugging table, row 8.",
    assignments=(REVERSAL.name,),
    mechanism="the first failing length is the positional table's length, while shorter inputs run",
)


def diagnose(ev):
    c = ev.failed("long-inputs")
    if not c:
        return None
    d = c.get("data") or {}
    pe_len, first = d.get("pe_len"), d.get("first_failure")
    # Only a failure that starts past the table's length is this cause (a mask or wiring bug fails at every length).
    if pe_len is None or first is None or pe_len > first + 1 or not ev.passed("shapes"):
        return None
    lines = [say(c), f"the positional table has {pe_len} rows; the model's max_len promises more"]
    errs = [e["id"] for e in ev.errors_matching(f"({pe_len})")]   # e.g. greedy_decode running past the table
    return Finding(0.85, lines, c.get("location"), explains=("long-inputs",) + tuple(errs))
