"""Masked attention gives NaN (a role probe's cause: any pack binding the attention role)."""
from .base import Cause
from .role_rules import ASSIGNMENTS, observed, rule, model_leaks

CAUSE = Cause(
    id='attention-mask-nan',
    title='Masked attention gives NaN',
    what='Blocked scores are filled with +inf (or the fill leaves a row with no finite score), so the softmax returns NaN.',
    why='softmax(+inf) is inf/inf = NaN; a blocked score must become -inf (or a large negative number) so that its weight is 0.',
    symptom="The attention's output holds NaN as soon as a mask is given.",
    fix="scores = scores.masked_fill(attn_mask == 0, float('-inf')) (minus infinity), applied before the softmax.",
    lesson='CS231n assignment 3, MultiHeadAttention.',
    assignments=ASSIGNMENTS,
    mechanism='the output under a mask that leaves every row an allowed key holds NaN, while the unmasked output is finite (kind nan)',
    observed=observed('attention', ('mask-float', 'mask-bool'), ('nan',)),
)

diagnose = rule('attention', ('mask-float', 'mask-bool'), ('nan',), explains=('causal',), also=model_leaks)
