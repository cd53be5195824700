"""Heads merged in the wrong order (a role probe's cause: any pack binding the attention role)."""
from .base import Cause
from .role_rules import ASSIGNMENTS, observed, rule, model_leaks

CAUSE = Cause(
    id='heads-merged-wrong',
    title='Heads merged in the wrong order',
    what="The heads' outputs (N, H, S, d) are reshaped to (N, S, E) without moving the head axis back first.",
    why="Reshaping straight from (N, H, S, d) interleaves the heads' rows: each output row mixes positions, so the result is not permutation-equivariant and masks seem to leak.",
    symptom="The output differs from the reference's given the same weights; reordering the queries does not reorder it.",
    fix='out = out.transpose(1, 2).reshape(N, S, E) (or .permute(0, 2, 1, 3)) before the output projection.',
    lesson='CS231n assignment 3, MultiHeadAttention.',
    assignments=ASSIGNMENTS,
    mechanism="the student's output equals the reference's heads merged by a plain reshape (kind heads-merged-wrong), computed with the student's weights",
    observed=observed('attention', ('reference',), ('heads-merged-wrong',)),
)

diagnose = rule('attention', ('reference',), ('heads-merged-wrong',), explains=('mask-float', 'mask-bool', 'causal', 'permutation', 'batch'), also=model_leaks)
