from ..assignments import REVERSAL
from .base import SHAPE_ERRORS, Cause, Finding, Observed, say

CAUSE = Cause(
    id="cross-attention-swapped",
    title="Cross-attention arguments swapped: the query comes from the encoder",
    what="cross_attn(memory, x, x, ...) instead of cross_attn(x, memory, memory, ...).",
    why="The query must come from the decoder and the keys/values from the encoder; swapped, the output has the "
        "source's length (a shape error) or, when lengths match, the model learns the wrong thing.",
    symptom="A shape mismatch at the first forward pass; with equal lengths, a model that ignores the source.",
    fix="c, cross = self.cross_attn(x, memory, memory, src_mask).",
    lesson="Debugging table, row 7; Step 3 'The line self.cross_attn(x, memory, memory, src_mask)'.",
    assignments=(REVERSAL.name,),
    mechanism="the encoder output measured as the query (not key/value) of the decoder's cross-attention",
    observed=(Observed("cross-attn-wiring", "measured.memory_as_query"),),
)


def diagnose(ev):
    c = ev.failed("cross-attn-wiring")
    if not c or not (c["measured"] or {}).get("memory_as_query"):
        return None
    ev_lines = [say(c)]
    errs = ev.errors_matching(*SHAPE_ERRORS)
    ev_lines += [say(e) for e in errs[:2]]
    return Finding(0.95, ev_lines, c.get("location") or (errs[0].get("location") if errs else None),
                   explains=("cross-attn-wiring", "source-sensitivity", "overfit", "long-inputs") + tuple(e["id"] for e in errs))
