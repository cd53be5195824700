"""Attention scores not divided by sqrt(head_dim) (a role probe's cause: any pack binding the attention role)."""
from .base import Cause
from .role_rules import ASSIGNMENTS, observed, rule

CAUSE = Cause(
    id='attention-scale-missing',
    title='Attention scores not divided by sqrt(head_dim)',
    what='Q K^T is not scaled by 1/sqrt(head_dim) (or is scaled by another width).',
    why='q.k grows like sqrt(head_dim); unscaled, the softmax saturates towards one-hot rows and its gradients vanish.',
    symptom="The attention weights differ from the reference's given the same weights.",
    fix='scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim).',
    lesson='CS231n assignment 3, MultiHeadAttention: scaled dot-product attention.',
    assignments=ASSIGNMENTS,
    mechanism="the spread of the student's log-weights over the reference's with the same weights is sqrt(head_dim) (kind unscaled) or another factor (wrong-scale)",
    observed=observed('attention', ('scale',), ('unscaled', 'wrong-scale')),
)

diagnose = rule('attention', ('scale',), ('unscaled', 'wrong-scale'), explains=('reference',))
