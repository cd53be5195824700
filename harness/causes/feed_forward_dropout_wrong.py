"""The feed-forward drops in eval mode, or never in training (a role probe's cause: the feed-forward role)."""
from .base import Cause
from .role_rules import ASSIGNMENTS, inside, observed, rule

KINDS = ('dropout-in-eval', 'dropout-missing')

CAUSE = Cause(
    id='feed-forward-dropout-wrong',
    title='The feed-forward network drops in eval mode, or never in training',
    what="A dropout call in the position-wise feed-forward ignores the module's mode: told to train in eval mode (functional dropout with training=True), or no dropout is applied in training.",
    why='Every layer and model built on the network inherits it: in eval their outputs are random (validation and sampling differ run to run); without dropout in training the network is not regularised as the assignment asks.',
    symptom='Two eval passes of the feed-forward differ, or two training passes agree (dropout 0.5).',
    fix='Use the nn.Dropout module the constructor makes (it follows model.eval()/train()), or F.dropout(x, p, training=self.training).',
    lesson='CS231n assignment 3 (2025), FeedForwardNetwork: fc1, GELU, dropout, fc2; dropout in training only.',
    assignments=ASSIGNMENTS,
    mechanism="two passes in eval mode differ with a dropout call made from the student's file told it trains (kind dropout-in-eval), or two training passes agree (kind dropout-missing)",
    observed=observed('feed-forward', ('dropout',), KINDS),
)

# random in eval, the network makes every piece built on it random: the layers' and models' comparisons of passes
diagnose = rule('feed-forward', ('dropout',), KINDS, explains=('position-wise', 'nonlinear', 'reference'),
                also=inside(('layer', 'model', 'sampler', 'classifier'),
                            ('dropout', 'mask', 'reference', 'causal', 'sample', 'eval-determinism')))
