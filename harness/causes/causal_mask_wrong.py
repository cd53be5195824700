"""The model's causal mask is not the lower triangle (a role probe's cause: any pack binding the model role)."""
from .base import Cause
from .role_rules import ASSIGNMENTS, observed, rule

CAUSE = Cause(
    id='causal-mask-wrong',
    title="The model's causal mask is not the lower triangle",
    what='The captioning model builds its target mask wrong: upper-triangular, flipped left-right, of shape T x 1, all ones, or with the diagonal blocked.',
    why='Position t must see positions <= t only; otherwise it reads the words it is asked to predict (training loss falls, sampling fails).',
    symptom="Changing a later caption token moves earlier positions' scores.",
    fix='tgt_mask = torch.tril(torch.ones(T, T)) (1 = may attend), passed to the decoder.',
    lesson="CS231n assignment 3, CaptioningTransformer.forward: 'mask out future timesteps'.",
    assignments=ASSIGNMENTS,
    mechanism='the mask the model hands its attention, read during forward and compared with the lower triangle (kinds upper, flipped, shape, all-allowed, diagonal-blocked, inverted, other), with the leak measured',
    observed=observed('model', ('causal',), ('upper', 'flipped', 'shape', 'all-allowed', 'diagonal-blocked', 'other', 'no-mask')),
)

diagnose = rule('model', ('causal',), ('upper', 'flipped', 'shape', 'all-allowed', 'diagonal-blocked', 'other', 'no-mask'), explains=('reference',))
