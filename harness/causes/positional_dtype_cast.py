"""Positional encoding casts its input's dtype (a role probe's cause: any pack binding the positional role)."""
from .base import Cause
from .role_rules import ASSIGNMENTS, observed, rule

CAUSE = Cause(
    id='positional-dtype-cast',
    title="Positional encoding casts its input's dtype",
    what='forward writes x + table into a tensor it made itself (torch.empty((N, S, D)), float32), so a float64 input comes back float32.',
    why="The caller's dtype is silently lost: a float64 model (the course's gradient and captioning checks) then fails in the next layer with a dtype mismatch.",
    symptom='A float64 input gives a float32 output.',
    fix="return self.dropout(x + self.pe[:, :S, :D]) (a new tensor of the input's dtype), or torch.empty_like(x).",
    lesson='CS231n assignment 3, PositionalEncoding.forward.',
    assignments=ASSIGNMENTS,
    mechanism="the output's dtype for a float64 input, measured (kind cast)",
    observed=observed('positional', ('dtype',), ('cast',)),
)

diagnose = rule('positional', ('dtype',), ('cast',), explains=())
