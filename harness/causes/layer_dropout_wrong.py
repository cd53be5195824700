"""The layer is random in eval mode or never drops in training (a role probe's cause: the layer role)."""
from .base import Cause
from .role_rules import ASSIGNMENTS, attention_unwritten, failed, observed, rule, unwritten

KINDS = ('dropout-in-eval', 'dropout-missing')

CAUSE = Cause(
    id='layer-dropout-wrong',
    title='The layer drops in eval mode, or never in training',
    what='A dropout call in the layer ignores the module\'s mode: told to train in eval mode (functional dropout with training=True), or dropout is never applied in training.',
    why='In eval the output is random (sampling and validation differ run to run); without dropout in training the layer is not regularised as the assignment asks.',
    symptom='Two eval passes differ, or two training passes agree (dropout 0.5).',
    fix='Use the nn.Dropout modules the constructor makes (they follow model.eval()/train()), or F.dropout(x, p, training=self.training).',
    lesson='CS231n assignment 3 (2025): dropout after each sublayer, in training only.',
    assignments=ASSIGNMENTS,
    mechanism="two passes in eval mode differ with a dropout call told it trains (kind dropout-in-eval), or two training passes agree (kind dropout-missing)",
    observed=observed('layer', ('dropout',), KINDS),
)

_rule = rule('layer', ('dropout',), KINDS, explains=('reference',))


def diagnose(ev):
    """The layer's own dropout, unless its attention or its feed-forward is random in eval itself
    (attention-dropout-in-eval, feed-forward-dropout-wrong name that, and explain the layer's failures) or is still
    the starter (a placeholder torch.empty is random too)."""
    if any(failed(ev, "attention", "eval-determinism")) or attention_unwritten(ev) or \
            any(failed(ev, "feed-forward", "dropout")) or unwritten(ev, "feed-forward"):
        return None
    return _rule(ev)
