"""The mutant library: described, minimal bugs in the lessons' reference models.

    from mutants import MUTANTS, get, by_cause, source, diff

``MUTANTS`` is one hand-written tuple (mutants/registry.py); ``source(m)`` is
the mutated file's text and ``diff(m)`` its unified diff against the reference.
``export_submissions`` writes them as anonymous submission files.
The `lm` mutants are ``LM_MUTANTS`` (mutants/lm_registry.py), kept out of
``MUTANTS`` until their causes have rules; ``ALL_MUTANTS`` and ``get_any``
cover both.
"""
from .export import MANIFEST_CSV, MANIFEST_JSON, SHUFFLE_SEED, ExportError, export_submissions, plan_export
from harness.assignments import BUILT_IN

from .model import ASSIGNMENTS, Edit, EditError, Mutant, apply_edits, diff, reference_source, source
from .lm_registry import LM, LM_MUTANTS, LmMutant, by_component, lm_get
from .registry import BLOCK, MUTANTS, REVERSAL, by_assignment, by_cause, causes, get

# the built-in assignments: a pack's mutants live in its own package (Pack.mutants), not in this library yet
ALL_ASSIGNMENTS = tuple(a.name for a in BUILT_IN)
ALL_MUTANTS = MUTANTS + LM_MUTANTS


def get_any(mutant_id: str) -> Mutant:
    """A mutant of any assignment, lm included; KeyError otherwise."""
    try:
        return get(mutant_id)
    except KeyError:
        return lm_get(mutant_id)

__all__ = [
    "ALL_ASSIGNMENTS", "ALL_MUTANTS", "LM", "LM_MUTANTS", "LmMutant", "by_component", "get_any", "lm_get",
    "ASSIGNMENTS", "BLOCK", "Edit", "EditError", "ExportError", "MANIFEST_CSV", "MANIFEST_JSON",
    "MUTANTS", "Mutant", "REVERSAL", "SHUFFLE_SEED", "apply_edits", "by_assignment", "by_cause",
    "causes", "diff", "export_submissions", "get", "plan_export", "reference_source", "source",
]
