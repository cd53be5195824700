"""The generic probes by role (harness/packs/api.py ROLES): what any pack's bound piece is measured for.

ROLE_PROBES maps a role to its probes; the pack machinery builds a RoleContext per binding and calls each probe's
fn(rctx) -> [check], every check's id f"{binding.component}.{probe.id}"."""
from __future__ import annotations

from . import attention, classifier, feedforward, layer, model, patch, positional
from .context import RoleContext, RoleProbe

ROLE_PROBES: dict[str, tuple[RoleProbe, ...]] = {
    "attention": tuple(RoleProbe(i, fn, cost) for i, fn, cost in attention.PROBES_SPEC),
    "positional": tuple(RoleProbe(i, fn, cost) for i, fn, cost in positional.PROBES_SPEC),
    "model": tuple(RoleProbe(i, fn, cost) for i, fn, cost in model.PROBES_SPEC),
    "layer": tuple(RoleProbe(i, fn, cost) for i, fn, cost in layer.PROBES_SPEC),
    "sampler": tuple(RoleProbe(i, fn, cost) for i, fn, cost in model.SAMPLER_SPEC),
    "feed-forward": tuple(RoleProbe(i, fn, cost) for i, fn, cost in feedforward.PROBES_SPEC),
    "patch-embedding": tuple(RoleProbe(i, fn, cost) for i, fn, cost in patch.PROBES_SPEC),
    "classifier": tuple(RoleProbe(i, fn, cost) for i, fn, cost in classifier.PROBES_SPEC),
}

__all__ = ["ROLE_PROBES", "RoleContext", "RoleProbe"]
