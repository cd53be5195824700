"""Positional encoding added in place to the caller's tensor (a role probe's cause: any pack binding the positional role)."""
from .base import Cause
from .role_rules import ASSIGNMENTS, observed, rule

CAUSE = Cause(
    id='positional-in-place',
    title="Positional encoding added in place to the caller's tensor",
    what="forward adds the table into the input tensor (x += pe), changing the caller's tensor.",
    why="The caller's embedding now holds the encoding too; a caller that adds the returned value back gets embedding twice, and autograd may refuse the in-place write.",
    symptom='The tensor passed to forward has changed after the call.',
    fix='out = x + self.pe[:, :S, :D] (a new tensor).',
    lesson='CS231n assignment 3, PositionalEncoding.forward.',
    assignments=ASSIGNMENTS,
    mechanism="the caller's tensor compared before and after forward (kind in-place)",
    observed=observed('positional', ('in-place',), ('in-place',)),
)

diagnose = rule('positional', ('in-place',), ('in-place',), explains=())
