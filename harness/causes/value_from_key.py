"""The value projection is applied to the key input (a role probe's cause: any pack binding the attention role)."""
from .base import Cause
from .role_rules import ASSIGNMENTS, observed, rule

CAUSE = Cause(
    id='value-from-key',
    title='The value projection is applied to the key input',
    what='The values are projected from the key input, so the value input is never read.',
    why='With key == value (self-attention, and every check the course runs) nothing shows; in cross-attention or any call with distinct key and value the output is wrong.',
    symptom='The output does not move when only the value input changes.',
    fix='v = self.value(value), not self.value(key).',
    lesson='CS231n assignment 3, MultiHeadAttention.forward(query, key, value).',
    assignments=ASSIGNMENTS,
    mechanism='the output with another value input is unchanged and equals the output with the key passed as the value (kind value-from-key)',
    observed=observed('attention', ('inputs',), ('value-from-key', 'value-unused')),
)

diagnose = rule('attention', ('inputs',), ('value-from-key', 'value-unused'), explains=('reference',))
