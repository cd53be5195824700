"""The layer raises when called without its mask (a role probe's cause: any pack binding the layer role)."""
from .base import Cause
from .role_rules import ASSIGNMENTS, observed, rule

KINDS = ('mask-default', 'none-mask-fails')

CAUSE = Cause(
    id='layer-fails-without-mask',
    title='The layer raises when called without its mask',
    what="The layer works with a mask but raises when the mask is left out: the mask parameter's default is not None (a type written where the default belongs), or None is used as a tensor.",
    why='Callers that pass no mask (an encoder over a whole image, a model built by someone else) crash; the course passes a mask or None explicitly, so its checks may not see it.',
    symptom="The layer called without its mask raises where the call with the mask works.",
    fix='def forward(self, src, src_mask=None): ... and pass the mask on only when it is not None (`if mask is not None`).',
    lesson='CS231n assignment 3 (2025), TransformerEncoderLayer.forward(src, src_mask=None).',
    assignments=ASSIGNMENTS,
    mechanism="the same layer called with the mask and without it; the forward's mask default read from its syntax (kinds mask-default: the default is not None; none-mask-fails: None is used as a tensor)",
    observed=observed('layer', ('call',), KINDS),
)

diagnose = rule('layer', ('call',), KINDS, explains=())
