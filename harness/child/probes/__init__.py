"""The probes: every assignment's plan, chosen by its pack (harness/packs/api.py Pack).

A probe is `fn(ctx) -> list[check]`. `cost` decides what `--quick` skips: static and quick probes run always,
train probes only in a full check. `side` probes train and read nothing other probes leave: with a spare core they
run in a second process, forked after the static probes (child/side.py). A one-file or repository pack lists its
own probes in order (reversal_plan.py, block_plan.py, lm/plan.py; read top to bottom, no discovery magic); a
folder pack's are its bindings' generic role probes and its own (probes/packs.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ...assignments import PACKS, pack_of
from ...packs.discover import load as load_target


@dataclass(frozen=True)
class Probe:
    id: str
    fn: Callable
    assignments: tuple
    cost: str  # "static" | "quick" | "train"
    side: bool = False  # trains: may run in a second process beside the others (child_side.py)


def _own(name: str, pack) -> tuple[Probe, ...]:
    return tuple(Probe(p.id, p.fn, (name,), getattr(p, "cost", "quick"), bool(getattr(p, "side", False)))
                 for p in load_target(pack.probes))


# every probe a one-file or repository pack runs (reversal, block, lm and any installed one), in the packs' order
PROBES: tuple[Probe, ...] = tuple(p for name, pack in PACKS.items() if not pack.is_folder for p in _own(name, pack))

# Probes that read nothing another non-static probe leaves in ctx.cache (each builds its own model and inputs),
# so either process may run them: a repair's re-check splits them by the checked run's own timings
# (child_side.plan). Each pack's own probes say so themselves (`either`: probes/own.py).
EITHER = frozenset(p.id for pack in PACKS.values() if not pack.is_folder for p in load_target(pack.probes)
                   if getattr(p, "either", False))


def select(assignment: str, quick: bool, only: str = "", extra: str = "", module=None) -> list:
    """The probes a run does: its assignment's, less the training ones under --quick. `only` (comma-separated
    ids): just these and contract (a repair's first re-check); `extra`: these too, even under --quick. The plan
    its pack and (a folder pack's) the loaded `module`'s edition make (probes/packs.py)."""
    pack = pack_of(assignment)
    run: list = []
    if pack is not None:
        from . import packs
        rec = getattr(module, packs.KEY, None)
        run = packs.plan(pack, rec.get("edition") if isinstance(rec, dict) else None, False, Probe)
    want, also = set(filter(None, only.split(","))), set(filter(None, extra.split(",")))
    return [p for p in run if ((p.id in want or p.id == "contract") if want else
                               not (quick and p.cost == "train") or p.id in also)]
