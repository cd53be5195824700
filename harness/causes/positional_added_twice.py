"""The model adds the positional module's input onto its output again (a role probe's cause: the model role)."""
from .base import Cause
from .role_rules import ASSIGNMENTS, observed, rule

CAUSE = Cause(
    id='positional-added-twice',
    title="The embedding is added onto the positional encoding's output again",
    what="The positional module already returns its input plus the table; the model adds that input once more (x = x + pe(x), or x += pe(x)), so the decoder gets 2 x embedding + table.",
    why='The embedding is counted twice against the position signal: the model is not the one the assignment describes, and its values differ from the course\'s.',
    symptom="The decoder's input is not what the positional module returned.",
    fix='x = self.positional_encoding(self.embedding(captions)): use the positional module\'s output as it is.',
    lesson='CS231n assignment 3, CaptioningTransformer.forward: PositionalEncoding.forward already adds x.',
    assignments=ASSIGNMENTS,
    mechanism="forward hooks on the model's submodules: a submodule's input equals an earlier submodule's output plus that submodule's own input, and that submodule adds its input (its output of a zero input is its table: output = input + table) (kind added-twice)",
    observed=observed('model', ('added-once',), ('added-twice',)),
)

diagnose = rule('model', ('added-once',), ('added-twice',), explains=('reference',))
