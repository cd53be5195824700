from ..assignments import REVERSAL
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="source-ignored",
    title="The decoder ignores the source",
    what="The encoder output does not reach every decoder layer: cross-attention attends to the decoder's own "
         "states, its output is dropped, or memory is not passed on.",
    why="Without the source the decoder can only produce fluent guesses; reversal is impossible.",
    symptom="Output fluent but unrelated to the input; cross-attention maps are a uniform grey; a single batch "
            "cannot be memorised.",
    fix="In every DecoderLayer: c, cross = self.cross_attn(x, memory, memory, src_mask); x = norm(x + drop(c)).",
    lesson="Debugging table, row 7; Step 7 'uniform grey field'.",
    assignments=(REVERSAL.name,),
    mechanism=('the logits measured not to change when every source token changes (the encoder output reaches '
               'nothing); cross-attention wiring alone: 0.75'),
    observed=(Observed("source-sensitivity", "status", ("fail",)),),
)


def diagnose(ev):
    sens = ev.failed("source-sensitivity")
    wiring = ev.failed("cross-attn-wiring")
    if wiring and (wiring["measured"] or {}).get("memory_as_query"):
        return None  # the swapped-arguments cause explains it
    if not sens and not wiring:
        return None
    lines = [say(c) for c in (sens, wiring) if c]
    if ev.failed("gradient-flow"):
        lines.append("consequence: " + say(ev.failed("gradient-flow")))
    if ev.failed("overfit"):
        lines.append(say(ev.failed("overfit")))
    loc = (sens or {}).get("location") or (wiring or {}).get("location")
    return Finding(0.9 if sens else 0.75, lines, loc,
                   explains=("source-sensitivity", "cross-attn-wiring", "overfit", "gradient-flow", "brief-training",
                             "decode-accuracy"))
