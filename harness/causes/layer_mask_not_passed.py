"""The layer never hands its mask to its attention (a role probe's cause: any pack binding the layer role)."""
from .base import Cause
from .role_rules import ASSIGNMENTS, model_leaks, observed, rule

CAUSE = Cause(
    id='layer-mask-not-passed',
    title="The layer's mask never reaches its attention",
    what='The layer takes a mask and calls its self-attention without it, so every position attends to every other.',
    why='A decoder layer then lets each position read the later ones (the future it must predict); an encoder ignores the padding it was told to skip.',
    symptom="Under the lower-triangular mask, changing a later position moves earlier positions' outputs.",
    fix='self.self_attn(query=x, key=x, value=x, attn_mask=mask): pass the layer\'s mask on.',
    lesson='CS231n assignment 3 (2025), TransformerDecoderLayer / TransformerEncoderLayer.forward.',
    assignments=ASSIGNMENTS,
    mechanism="a later position perturbed under the lower-triangular mask moves earlier outputs, and a forward pre-hook on every submodule sees none of them handed the mask (kind not-passed)",
    observed=observed('layer', ('mask',), ('not-passed',)),
)

diagnose = rule('layer', ('mask',), ('not-passed',), explains=('reference',), also=model_leaks)
