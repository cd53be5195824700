"""Positional encoding computed but not added (a role probe's cause: any pack binding the positional role)."""
from .base import Cause
from .role_rules import ASSIGNMENTS, observed, rule

CAUSE = Cause(
    id='positional-not-added',
    title='Positional encoding computed but not added',
    what='forward builds the encoding but returns the input (or the table alone).',
    why='The model then has no position information: a decoder cannot tell word order.',
    symptom='The output of PositionalEncoding equals its input.',
    fix='return self.dropout(x + self.pe[:, :S, :D]).',
    lesson='CS231n assignment 3, PositionalEncoding.forward.',
    assignments=ASSIGNMENTS,
    mechanism='the output equals the input exactly (kind not-added) or the table alone (input-dropped)',
    observed=observed('positional', ('added',), ('not-added', 'input-dropped')),
)

diagnose = rule('positional', ('added',), ('not-added', 'input-dropped'), explains=('formula',))
