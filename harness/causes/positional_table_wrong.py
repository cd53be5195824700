"""Positional table does not follow the declared formula (a role probe's cause: any pack binding the positional role)."""
from .base import Cause
from .role_rules import ASSIGNMENTS, observed, rule

CAUSE = Cause(
    id='positional-table-wrong',
    title='Positional table does not follow the declared formula',
    what='The sin/cos table differs from the formula the assignment declares: an exponent on the wrong index, sin and cos swapped, a wrong frequency.',
    why="Nothing errors and small checks (D = 6) can pass, but the encoding's frequencies are wrong from some column on.",
    symptom='The table read from the output of a zero input differs from the formula.',
    fix='w_k = 10000^(-2k/D) for both columns of pair k: pe[:, 0::2] = sin(pos * w), pe[:, 1::2] = cos(pos * w).',
    lesson='CS231n assignment 3, PositionalEncoding: PE(i, j) = sin(i * 10000^(-j/d)) for even j, cos(i * 10000^(-(j-1)/d)) for odd j.',
    assignments=ASSIGNMENTS,
    mechanism='the table compared column by column with the declared formula and with the known wrong ones (kinds odd-exponent, sin-cos-swapped, odd-columns, even-columns, table, shape)',
    observed=observed('positional', ('formula',), ('odd-exponent', 'sin-cos-swapped', 'odd-columns', 'even-columns', 'table', 'shape')),
)

diagnose = rule('positional', ('formula',), ('odd-exponent', 'sin-cos-swapped', 'odd-columns', 'even-columns', 'table', 'shape'), explains=())
