"""Measurements of assignment `lm` (CS336 assignment-1 adapters), per component; the decisions are the parent's.

  diagnose.measure_component(component, adapter_fn) -> JSON-able measurements (the first disagreement, the
                                            interface findings, the fingerprint, the properties; no cause)
  diagnose.diagnose_component(component, adapter_fn) -> the diagnosis (status, cause, confidence, evidence):
                                            measure_component, then harness/causes/lm_decide.py's decide
  diagnose.diagnose_adapters({adapter name: fn}) -> every component and the first failing one
  fingerprint.match(component, fn)          the lm mutant whose numbers the adapter reproduces (fingerprint():
                                            the same, decided)
  properties.check(component, fn)            properties every correct implementation has (each with the cause
                                            its failure names and a confidence, as declared data)
  interface.*                                key/argument/dtype/None/bias problems, measured

Where decisions live: one engine, as for reversal and block. In the sandboxed child, the probe
(harness/child/probes/lm/components.py `diagnose_further`) calls measure_component for a component whose
lm-<component> check fails (every stage is measured; one that could not be is in `not_measured`) and puts
the measurements in the check's `data.lmdiag_measured`. In the parent, engine.validate_payload calls
harness/causes/lm_decide.py `annotate`: it validates the measurements (types, bounds; a cause or mutant id it
does not know is not trusted), runs the cascade (interface -> fingerprint -> swapped arguments -> properties ->
no cause) and writes its decision at `data.lmdiag`, which harness/causes/lm_component.py turns into the
finding. This package imports lm_decide (torch-free) so that in-process callers (the pytest plugin, benches,
tests) get the same decision from the same rules. Component names may be spelled either
way (mha-rope or mha_rope). Partial credit is the grader's
(harness/grading/rubric_lm.py, on the check's result).

Cause ids: the lm mutant catalogue's (mutants/lm_registry.py), `interface-mismatch`, and the ones
below, which only properties name (no mutant makes them); the parent trusts no other id from the child
(causes/lm_decide.py `known_causes`). Where the lmcheck branch's property causes name the same thing, the id is theirs (rope-rotates-at-position-0, rope-not-a-rotation,
rope-not-relative, rmsnorm-not-scale-invariant, softmax-not-shift-invariant, future-tokens-visible).
"""
from __future__ import annotations

from .....lm_property_causes import PROPERTY_CAUSES  # noqa: F401 - one table, shared with the parent


def cause_ids() -> set[str]:
    """Every cause id a diagnosis can name."""
    from mutants.lm_registry import LM_MUTANTS
    return {m.cause for m in LM_MUTANTS} | set(PROPERTY_CAUSES) | {"interface-mismatch"}
