"""The attention mask blocks the wrong pairs (a role probe's cause: any pack binding the attention role)."""
from .base import Cause
from .role_rules import ASSIGNMENTS, observed, rule, model_leaks

CAUSE = Cause(
    id='attention-mask-misapplied',
    title='The attention mask blocks the wrong pairs',
    what='The mask is applied but reshaped, padded, transposed or broadcast so that some blocked pairs leak and some allowed ones are cut.',
    why='Any (S, T) mask must block exactly its 0 entries at (query i, key j); reshaping or padding it moves the entries to other pairs.',
    symptom="Some keys the mask blocks move their query's output, and some it allows do not.",
    fix="Apply the (S, T) mask as given, broadcast over batch and heads: scores.masked_fill(attn_mask == 0, float('-inf')) with scores of shape (N, H, S, T).",
    lesson="CS231n assignment 3, MultiHeadAttention's attn_mask of shape (S, T).",
    assignments=ASSIGNMENTS,
    mechanism='the (query, key) pairs measured to leak or be cut, against the mask (kinds partial, transposed); a pattern, not one statement: named below 0.8',
    observed=observed('attention', ('mask-float', 'mask-bool', 'causal'), ('partial', 'transposed')),
)

diagnose = rule('attention', ('mask-float', 'mask-bool', 'causal'), ('partial', 'transposed'), explains=(), also=model_leaks, confidence=0.7)
