"""A classifier's encoder is given a mask that hides patches (a role probe's cause: the classifier role)."""
from .base import Cause
from .role_rules import ASSIGNMENTS, observed, rule

CAUSE = Cause(
    id='encoder-attention-masked',
    title="The vision transformer's encoder masks its attention",
    what="The encoder over an image's patches is handed a mask (a causal triangle copied from a decoder) that keeps each patch from attending to the patches after it.",
    why="An image's patches have no order to respect: under a causal mask the first tokens never see most of the image, and the pooled representation reads a lopsided view of it.",
    symptom="Changing the last patch leaves the encoder's output at the earlier tokens unchanged.",
    fix="Call the encoder without a mask (self.transformer(tokens)): every patch attends to every patch.",
    lesson='CS231n assignment 3 (2025), VisionTransformer: an encoder, unmasked, then mean pooling and the head.',
    assignments=ASSIGNMENTS,
    mechanism="the last patch perturbed: the encoder's output tokens that do not move, with the mask its submodules are handed read during forward and classified (kind masked: a mask that blocks, e.g. causal)",
    observed=observed('classifier', ('attends-all',), ('masked',)),
)

diagnose = rule('classifier', ('attends-all',), ('masked',), explains=('reference',))
