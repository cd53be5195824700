"""The layer calls its sublayers in another order than the reference (a role probe's cause: the layer role)."""
from .base import Cause
from .role_rules import ASSIGNMENTS, observed, rule

CAUSE = Cause(
    id='layer-sublayer-order',
    title='The layer runs its norms and sublayers in another order',
    what='The layer normalises before its sublayer (pre-norm) where the assignment normalises after the residual (post-norm), or otherwise calls its submodules in another order.',
    why='The same weights give another function: the course\'s values do not match and a model trained with one order does not load into the other.',
    symptom="With the student's weights the reference's output is not reproduced.",
    fix='Follow the assignment\'s order: x = norm(x + dropout(sublayer(x))) for each sublayer.',
    lesson='CS231n assignment 3 (2025), TransformerDecoderLayer / TransformerEncoderLayer: post-norm residual blocks.',
    assignments=ASSIGNMENTS,
    mechanism="forward hooks on the layer's submodules give the order they run in, against the reference's given the same weights (kind order)",
    observed=observed('layer', ('reference',), ('order',)),
)

diagnose = rule('layer', ('reference',), ('order',), explains=(), confidence=0.85)
