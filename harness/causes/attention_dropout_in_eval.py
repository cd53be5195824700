"""Attention dropout active in eval mode (a role probe's cause: any pack binding the attention role)."""
from .base import Cause
from .role_rules import ASSIGNMENTS, layer_failures, observed, rule

CAUSE = Cause(
    id='attention-dropout-in-eval',
    title='Attention dropout active in eval mode',
    what='Dropout is called as a function told it trains (F.dropout(x, p) defaults to training=True), so it drops in eval mode too.',
    why="Inference becomes random and every comparison of two passes fails; the course's checks run in training mode and cannot see it.",
    symptom='Two eval-mode passes of the same inputs differ.',
    fix='Use the module (self.attn_drop(weights)) or F.dropout(weights, p, training=self.training).',
    lesson='CS231n assignment 3, MultiHeadAttention: dropout on the attention weights in training.',
    assignments=ASSIGNMENTS,
    mechanism="a dropout call made from the student's file is told to train while the module is in eval mode (kind dropout-in-eval)",
    observed=observed('attention', ('eval-determinism',), ('dropout-in-eval',)),
)

diagnose = rule('attention', ('eval-determinism',), ('dropout-in-eval',), explains=('mask-float', 'mask-bool', 'causal', 'batch', 'permutation', 'inputs', 'scale', 'reference'), also=layer_failures)
