from ..assignments import BLOCK
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    id="causal-bias-symmetric",
    title="Causal bias built symmetric: the keys ahead get a distance penalty, not -inf",
    what="The attention's causality is meant to come from a relative position bias (ALiBi-style: -slope times "
         "the distance to the key, with no separate mask), but the bias is built symmetric, -slope * |i - j| "
         "(an abs() of the distance): a key ahead gets the same finite penalty as the key as far behind.",
    why="A causal bias must make the keys ahead unreachable (-inf, or a large negative, for j > i). A symmetric "
        "one only makes them less likely: every query still reads the tokens after it, so the model trains "
        "on the answer and fails at generation, where those tokens do not exist yet. A symmetric bias is "
        "harmless only next to a causal mask, which never reads its future half.",
    symptom="The leakage test fails: with the causal flag on, earlier outputs change when a later token "
            "changes, and the weights above the diagonal are not 0.",
    mechanism="No mask reaches the softmax, and a position-by-position table that does not depend on the tokens "
              "is added to the scores with finite entries for the keys ahead that mirror the past ones "
              "(b[i, j] = b[j, i]); the statement that first makes it is located.",
    fix="Build the causal bias one-sided: -slope * (i - j) for j <= i and -inf for j > i, e.g. "
        "torch.where(j <= i, -slope * (i - j), float('-inf')) instead of -slope * (i - j).abs(); or keep the "
        "symmetric bias and apply the causal mask (masked_fill of the strict upper triangle with -inf) as well.",
    lesson="The exercise: a boolean causal flag; position i may attend to positions j <= i only.",
    assignments=(BLOCK.name,),
    # the table measured symmetric, finite and token-independent (kind symmetric-bias), and seen joining the scores
    observed=(Observed("block-causal", "data.bias.joins_line"),),
)


def diagnose(ev):
    c = ev.failed("block-causal")
    data = (c or {}).get("data") or {}
    bias = data.get("bias") if isinstance(data.get("bias"), dict) else {}
    if data.get("kind") != "symmetric-bias" or not bias:
        return None
    joined = bias.get("joins_line")
    evidence = [say(c)]
    if joined:
        evidence.append(f"mechanism: the symmetric table made on line {bias.get('line')} joins the scores on line "
                        f"{joined} ({bias.get('joins_op')}); mirror error {bias.get('mirror_error')}, its entries "
                        f"for the keys ahead finite")
    share = bias.get("future_weight_mean")
    if isinstance(share, (int, float)):
        evidence.append(f"the keys ahead get {share:.0%} of a row's weight on average "
                        f"(largest {bias.get('future_weight_max')})")
    # where it joins the scores not seen: the table is measured, its use is not (below 0.8)
    return Finding(0.9 if joined else 0.7, evidence, c.get("location"), explains=("block-causal", "block-lm"))
