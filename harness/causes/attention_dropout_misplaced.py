"""Attention dropout on the wrong tensor (a role probe's cause: any pack binding the attention role)."""
from .base import Cause
from .role_rules import ASSIGNMENTS, observed, rule

CAUSE = Cause(
    id='attention-dropout-misplaced',
    title='Attention dropout on the wrong tensor',
    what='Dropout is applied to the attention output (or not at all) instead of to the attention weights.',
    why='The course drops attention weights: which keys a query may read. Dropping the merged output is a different regulariser and the train-mode values differ.',
    symptom="The course's training-mode check differs; no dropout call on a (query, key) tensor in training.",
    fix='weights = self.attn_drop(torch.softmax(scores, dim=-1)), then weights @ v.',
    lesson='CS231n assignment 3, MultiHeadAttention.',
    assignments=ASSIGNMENTS,
    mechanism='the dropout calls of a training pass, recorded with their input shapes: none on a tensor ending in (S, T) (kinds on-output, missing)',
    observed=observed('attention', ('dropout',), ('on-output', 'missing')),
)

diagnose = rule('attention', ('dropout',), ('on-output', 'missing'), explains=())
