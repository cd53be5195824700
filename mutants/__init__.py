"""The mutant library: described, minimal bugs in the lessons' reference models.

    from mutants import MUTANTS, get, by_cause, source, diff

``MUTANTS`` is one hand-written tuple (mutants/registry.py); ``source(m)`` is
the mutated file's text and ``diff(m)`` its unified diff against the reference.
``export_submissions`` writes them as anonymous submission files.
"""
from .export import MANIFEST_CSV, MANIFEST_JSON, SHUFFLE_SEED, ExportError, export_submissions, plan_export
from .model import ASSIGNMENTS, Edit, EditError, Mutant, apply_edits, diff, reference_source, source
from .registry import BLOCK, MUTANTS, REVERSAL, by_assignment, by_cause, causes, get

__all__ = [
    "ASSIGNMENTS", "BLOCK", "Edit", "EditError", "ExportError", "MANIFEST_CSV", "MANIFEST_JSON",
    "MUTANTS", "Mutant", "REVERSAL", "SHUFFLE_SEED", "apply_edits", "by_assignment", "by_cause",
    "causes", "diff", "export_submissions", "get", "plan_export", "reference_source", "source",
]
