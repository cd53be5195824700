"""The feed-forward has no nonlinearity: the lessons' `ffn-nonlinear` probe, and any pack's feed-forward role
(`<component>.nonlinear`, harness/child/probes/roles/feedforward.py) measure the same property."""
from ..assignments import SINGLE_FILE
from .base import Cause, Finding, Observed, say
from .role_rules import ASSIGNMENTS, inside, observed, rule

CAUSE = Cause(
    id="feed-forward-linear",
    title="The feed-forward has no nonlinearity",
    what="The position-wise feed-forward stacks Linear layers with no activation between them.",
    why="Two Linears with nothing between them are one linear map: the layer adds no expressive power beyond "
        "the attention's projections.",
    symptom="f(a + b) = f(a) + f(b) - f(0) for the feed-forward, to float precision.",
    fix="Put the activation between the Linears: nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), "
        "nn.Linear(d_ff, d_model)).",
    lesson="Step 5 'The position-wise feed-forward'; CS231n assignment 3 (2025), FeedForwardNetwork (fc1, GELU, "
           "dropout, fc2).",
    assignments=SINGLE_FILE + ASSIGNMENTS,
    mechanism="the module measured to be affine on random inputs (additivity error at float noise)",
    observed=(Observed("ffn-nonlinear", values=("affine",)),) + observed('feed-forward', ('nonlinear',), ('affine',)),
)

# a pack's feed-forward role: it explains what the pieces built on it compute differently (their references)
_role = rule('feed-forward', ('nonlinear',), ('affine',), explains=('reference',),
             also=inside(('layer', 'model', 'sampler', 'classifier'), ('reference', 'sample')))


def diagnose(ev):
    c = ev.failed("ffn-nonlinear")
    mech = ev.mechanism("ffn-nonlinear")
    if not c or mech.get("kind") != "affine":
        return _role(ev)
    return Finding(0.9, [say(c), "mechanism: " + mech["text"]], c.get("location"))
