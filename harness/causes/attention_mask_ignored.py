"""The attention mask has no effect (a role probe's cause: any pack binding the attention role)."""
from .base import Cause
from .role_rules import ASSIGNMENTS, observed, rule, model_leaks

CAUSE = Cause(
    id='attention-mask-ignored',
    title='The attention mask has no effect',
    what='The attention never applies attn_mask: typically masked_fill is called out of place and its result dropped, or no masking step exists.',
    why='masked_fill returns a new tensor; without `scores = scores.masked_fill(...)` the softmax sees the unmasked scores and every query reads every key, the future included.',
    symptom="Perturbing a key the mask blocks moves its query's output as much as an allowed key does.",
    fix="Assign the result before the softmax: scores = scores.masked_fill(attn_mask == 0, float('-inf')).",
    lesson="CS231n assignment 3, MultiHeadAttention: 'mask[i, j] == 0 indicates token i should not attend to token j'.",
    assignments=ASSIGNMENTS,
    mechanism="every blocked (query, key) pair moves the query's output when its key is perturbed, with float and bool masks (kind ignored); the statement that drops masked_fill's result is named when the syntax shows it",
    observed=observed('attention', ('mask-float', 'mask-bool', 'causal'), ('ignored',)),
)

diagnose = rule('attention', ('mask-float', 'mask-bool', 'causal'), ('ignored',), explains=(), also=model_leaks)
