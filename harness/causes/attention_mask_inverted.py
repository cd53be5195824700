"""The attention mask blocks where it should attend (a role probe's cause: any pack binding the attention role)."""
from .base import Cause
from .role_rules import ASSIGNMENTS, observed, rule, model_leaks

CAUSE = Cause(
    id='attention-mask-inverted',
    title='The attention mask blocks where it should attend',
    what="The mask's convention is inverted: the positions the mask allows are filled with -inf and the blocked ones kept.",
    why="In the course's convention a 0 entry blocks; filling where the mask is 1 (or where it is truthy) keeps exactly the forbidden keys, and a causal mask then leaves the first row no key (NaN).",
    symptom='The output depends on the blocked keys only; with a causal mask, NaN in the first rows.',
    fix="Fill where the mask blocks: scores.masked_fill(attn_mask == 0, float('-inf')).",
    lesson="CS231n assignment 3, MultiHeadAttention's attn_mask convention.",
    assignments=ASSIGNMENTS,
    mechanism="every blocked pair moves its query's output and no allowed pair does (kind inverted), measured by perturbing one key at a time",
    observed=observed('attention', ('mask-float', 'mask-bool', 'causal'), ('inverted',)),
)

diagnose = rule('attention', ('mask-float', 'mask-bool', 'causal'), ('inverted',), explains=(), also=model_leaks)
