"""The `lm` assignment's probes (CS336 assignment 1, through the course's adapters), in the order they run: its
repository pack's `probes` (harness/packs/lm/pack.py). Child side.

One probe per component in the assignment's build order, then the training pieces, the properties every correct
implementation has (they say how a failing component is wrong), the model's parameters, and (full checks) the
whole model trained briefly with the student's own training pieces. None is `either`: they share where each
component's lines are (probes/lm/common.py).
"""
from __future__ import annotations

from ..own import Own
from . import components, parameters, properties, train_brief, training

PROBES = (Own("contract", components.contract, "static"),) + tuple(
    Own(f"lm-{c}", components.probe(c), "quick") for c in components.CASES) + (
    Own("lm-cross-entropy", components.diagnosed("cross-entropy", training.cross_entropy), "quick"),
    Own("lm-adamw", components.diagnosed("adamw", training.adamw), "quick", side=True),
    Own("lm-lr-schedule", components.diagnosed("lr-schedule", training.lr_schedule), "quick", side=True),
    Own("lm-gradient-clipping", components.diagnosed("gradient-clipping", training.gradient_clipping), "quick"),
    Own("lm-get-batch", components.diagnosed("get-batch", training.get_batch), "quick"),
    Own("lm-rope-properties", properties.rope, "quick"),
    Own("lm-rmsnorm-properties", properties.rmsnorm, "quick"),
    Own("lm-softmax-properties", properties.softmax, "quick"),
    Own("lm-causal", properties.causal, "quick"),
    Own("lm-parameters", parameters.parameters, "quick"),
    Own("lm-training", train_brief.brief_training, "train", side=True),
)
