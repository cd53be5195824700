"""Positional encoding's dropout not applied (a role probe's cause: any pack binding the positional role)."""
from .base import Cause
from .role_rules import ASSIGNMENTS, observed, rule

CAUSE = Cause(
    id='positional-dropout-lost',
    title="Positional encoding's dropout not applied",
    what='forward calls the dropout but drops its result, never calls it, or applies it in eval mode too.',
    why="The course's encoding ends with dropout in training only; without it the train-mode values differ, with it in eval inference is random.",
    symptom='In training no entry is zeroed (or in eval the output is not input + table).',
    fix='return self.dropout(x + self.pe[:, :S, :D]) (the module follows train/eval).',
    lesson='CS231n assignment 3, PositionalEncoding.forward.',
    assignments=ASSIGNMENTS,
    mechanism="training passes with p 0.5 zero no entry and the statement dropping the dropout's result is read (dropout-discarded), or none is called (dropout-missing), or an eval pass differs from input + table (dropout-in-eval)",
    observed=observed('positional', ('dropout',), ('dropout-discarded', 'dropout-missing', 'dropout-in-eval')),
)

diagnose = rule('positional', ('dropout',), ('dropout-discarded', 'dropout-missing', 'dropout-in-eval'), explains=())
