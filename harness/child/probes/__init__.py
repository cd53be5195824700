"""Every probe, in the order it runs. Read top to bottom; no discovery magic.

A probe is `fn(ctx) -> list[check]`. `cost` decides what `--quick` skips:
static and quick probes run always, train probes only in a full check. `side`
probes train and read nothing other probes leave: with a spare core they run
in a second process, forked after the static probes (child_side.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ...assignments import PACKS, REVERSAL, pack_of
from ...assignments import LM as LM_ASSIGNMENT
from ...packs.discover import load as load_target

from . import attention, contract, data, decode_batch, decoding, embedding
from .lm import components as lm_components, properties as lm_properties, train_brief as lm_train_brief, training as lm_training
from .lm import parameters as lm_parameters
from . import model_wiring, overfit, padding, positional, properties, residual_train, structure, training
from . import train_masks


@dataclass(frozen=True)
class Probe:
    id: str
    fn: Callable
    assignments: tuple
    cost: str  # "static" | "quick" | "train"
    side: bool = False  # trains: may run in a second process beside the others (child_side.py)


R, LM = (REVERSAL.name,), (LM_ASSIGNMENT.name,)   # the assignments a probe belongs to

# lm: the CS336 assignment-1 adapters, one probe per component in the assignment's build order
LM_PROBES = (Probe("contract", lm_components.contract, LM, "static"),) + tuple(
    Probe(f"lm-{c}", lm_components.probe(c), LM, "quick") for c in lm_components.CASES) + (
    Probe("lm-cross-entropy", lm_components.diagnosed("cross-entropy", lm_training.cross_entropy), LM, "quick"),
    Probe("lm-adamw", lm_components.diagnosed("adamw", lm_training.adamw), LM, "quick", side=True),
    Probe("lm-lr-schedule", lm_components.diagnosed("lr-schedule", lm_training.lr_schedule), LM, "quick",
          side=True),
    Probe("lm-gradient-clipping", lm_components.diagnosed("gradient-clipping", lm_training.gradient_clipping),
          LM, "quick"),
    Probe("lm-get-batch", lm_components.diagnosed("get-batch", lm_training.get_batch), LM, "quick"),
    # properties every correct implementation has: they say how a failing component is wrong
    Probe("lm-rope-properties", lm_properties.rope, LM, "quick"),
    Probe("lm-rmsnorm-properties", lm_properties.rmsnorm, LM, "quick"),
    Probe("lm-softmax-properties", lm_properties.softmax, LM, "quick"),
    Probe("lm-causal", lm_properties.causal, LM, "quick"),
    # the model's parameters: what its forward uses and model.parameters() (an optimizer's) does not hold
    Probe("lm-parameters", lm_parameters.parameters, LM, "quick"),
    # full checks: the whole model trained briefly with the student's own training pieces
    Probe("lm-training", lm_train_brief.brief_training, LM, "train", side=True),
)

PROBES = (
    Probe("contract", contract.names, R, "static"),
    Probe("shapes", contract.shapes, R, "static"),
    Probe("param-count", contract.param_count, R, "static"),
    Probe("data", data.make_batch, R, "static"),
    Probe("pe", positional.table, R, "static"),
    Probe("eval-determinism", properties.determinism, R, "quick"),
    Probe("batch-independence", properties.batch_independence, R, "quick"),
    Probe("first-loss", contract.first_loss, R, "quick"),
    Probe("attn-rows-sum", attention.softmax_axis, R, "quick"),
    Probe("attn-saturation", attention.saturation, R, "quick"),
    Probe("heads-permutation", attention.head_permutation, R, "quick"),
    Probe("causal-leak", attention.leakage, R, "quick"),
    Probe("causal-leak-train", train_masks.leak_in_training, R, "quick"),
    Probe("padding-invariance", padding.invariance, R, "quick"),
    Probe("padded-row-finite", padding.padded_row, R, "quick"),
    Probe("gradient-flow", model_wiring.gradient_flow, R, "quick"),
    Probe("residual", model_wiring.residual, R, "quick"),
    Probe("residual-train", residual_train.residual_train, R, "quick"),
    Probe("cross-wiring", model_wiring.cross_wiring, R, "quick"),
    Probe("stateless-forward", model_wiring.stateless, R, "quick"),
    Probe("embedding-scale", embedding.embedding_scale, R, "quick"),
    Probe("structure", structure.structure, R, "quick"),
    Probe("long-inputs", positional.long_inputs, R, "quick"),
    Probe("decode", decoding.encoder_calls, R, "quick"),
    Probe("decode-determinism", properties.decode_determinism, R, "quick"),
    Probe("decode-consistency", properties.decode_consistency, R, "quick"),
    Probe("decode-batch-rows", decode_batch.batch_rows, R, "quick"),
    Probe("train-trace", training.trace, R, "quick", side=True),
    Probe("overfit", overfit.overfit, R, "quick", side=True),
    Probe("brief-training", decoding.brief_training, R, "train", side=True),
) + LM_PROBES


# Probes that read nothing another non-static probe leaves in ctx.cache (each builds its own model and inputs),
# so either process may run them: a repair's re-check splits them by the checked run's own timings
# (child_side.plan). Not lm's: they share where each component's lines are (lm_common). A pack's own probes say so
# themselves (`either`; the one-file packs' are read here: probes/block_plan.py).
EITHER = frozenset(p.id for p in PROBES if p.cost != "static" and LM[0] not in p.assignments) | frozenset(
    p.id for pack in PACKS.values() if pack.is_file for p in load_target(pack.probes) if getattr(p, "either", False))


def select(assignment: str, quick: bool, only: str = "", extra: str = "", module=None) -> list:
    """The probes a run does: its assignment's, less the training ones under --quick. `only` (comma-separated
    ids): just these and contract (a repair's first re-check); `extra`: these too, even under --quick. A pack's
    assignment: the plan its pack and the loaded `module`'s edition make (probes/packs.py)."""
    pack = pack_of(assignment)
    if pack is not None:
        from . import packs
        rec = getattr(module, packs.KEY, None)
        run = packs.plan(pack, rec.get("edition") if isinstance(rec, dict) else None, False, Probe)
    else:
        run = [p for p in PROBES if assignment in p.assignments]
    want, also = set(filter(None, only.split(","))), set(filter(None, extra.split(",")))
    return [p for p in run if ((p.id in want or p.id == "contract") if want else
                               not (quick and p.cost == "train") or p.id in also)]
