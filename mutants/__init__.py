"""The mutant library: described, minimal bugs in the lessons' reference models.

    from mutants import MUTANTS, get, by_cause, source, diff

``MUTANTS`` is one hand-written tuple (mutants/registry.py); ``source(m)`` is
the mutated file's text and ``diff(m)`` its unified diff against the reference.
``export_submissions`` writes them as anonymous submission files.
The `lm` mutants are ``LM_MUTANTS`` (mutants/lm_registry.py), kept out of
``MUTANTS`` until their causes have rules; a pack's mutants are declared by the pack
(``Pack.mutants``, read by mutants/packs.py: ``PACK_MUTANTS``); ``ALL_MUTANTS`` and
``get_any`` cover all three.
"""
from .export import MANIFEST_CSV, MANIFEST_JSON, SHUFFLE_SEED, ExportError, export_submissions, plan_export
from harness.assignments import BUILT_IN

from .model import ASSIGNMENTS, Edit, EditError, Mutant, apply_edits, diff, reference_source, source
from .lm_registry import LM, LM_MUTANTS, LmMutant, by_component, lm_get
from .registry import BLOCK, MUTANTS, REVERSAL, by_assignment, by_cause, causes, get
from . import packs

# a pack's mutants live in its own package (Pack.mutants); the library lists them after the built-in ones
PACK_MUTANTS = packs.every()
ALL_ASSIGNMENTS = tuple(a.name for a in BUILT_IN) + packs.names()
ALL_MUTANTS = MUTANTS + LM_MUTANTS + PACK_MUTANTS


def get_any(mutant_id: str) -> Mutant:
    """A mutant of any assignment, lm's and the packs' included; KeyError otherwise."""
    try:
        return get(mutant_id)
    except KeyError:
        pass
    found = next((m for m in PACK_MUTANTS if m.id == mutant_id), None)
    return found if found is not None else lm_get(mutant_id)

__all__ = [
    "ALL_ASSIGNMENTS", "ALL_MUTANTS", "PACK_MUTANTS", "packs", "LM", "LM_MUTANTS", "LmMutant", "by_component", "get_any", "lm_get",
    "ASSIGNMENTS", "BLOCK", "Edit", "EditError", "ExportError", "MANIFEST_CSV", "MANIFEST_JSON",
    "MUTANTS", "Mutant", "REVERSAL", "SHUFFLE_SEED", "apply_edits", "by_assignment", "by_cause",
    "causes", "diff", "export_submissions", "get", "plan_export", "reference_source", "source",
]
