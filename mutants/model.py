"""The data model of the mutant library: an exact text edit and a described bug.

A mutant is a reference model from ``reference_model/`` with a few exact text
replacements applied, written the way students write the bug. Nothing here runs
the mutated code; ``source`` only builds its text and ``diff`` shows it.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from harness.assignments import SINGLE_FILE

ASSIGNMENTS = SINGLE_FILE     # the single-file assignments (harness/assignments.py); lm: lm_registry.py


class EditError(ValueError):
    """An edit's ``old`` text does not occur exactly once where it is applied."""


@dataclass(frozen=True)
class Edit:
    """Replace ``old`` (which must occur exactly once) by ``new``."""

    old: str
    new: str


@dataclass(frozen=True)
class Mutant:
    """One described bug in one of the lesson's reference models.

    id          stable kebab-case name, e.g. ``reversal-target-not-shifted``;
                a second way of writing the same bug gets a ``-b`` suffix.
    cause       the cause id the diagnostic engine should report.
    assignment  the name of a single-file assignment (harness/assignments.py).
    reference   the reference file, relative to the installed packages,
                e.g. ``"reference_model/reversal.py"``.
    edits       exact replacements applied in order to the reference text.
    summary     one line.
    explanation one paragraph for a student: what is wrong, why it hurts,
                what you would see.
    lesson      the lesson row or passage the bug comes from, quoted briefly.
    """

    id: str
    cause: str
    assignment: str
    reference: str
    edits: tuple[Edit, ...]
    summary: str
    explanation: str
    lesson: str

    @property
    def filename(self) -> str:
        """The reference file's base name, e.g. ``reversal.py``."""
        return self.reference.rsplit("/", 1)[-1]

    def source(self) -> str:
        return source(self)

    def diff(self) -> str:
        return diff(self)


@lru_cache(maxsize=None)
def reference_source(reference: str) -> str:
    """Text of a reference file given as ``"package/file.py"``."""
    package, _, name = reference.partition("/")
    if not package or not name:
        raise ValueError(f"reference must look like 'package/file.py', got {reference!r}")
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")


def apply_edits(text: str, edits: tuple[Edit, ...], label: str = "mutant") -> str:
    """Apply ``edits`` in order; each ``old`` must occur exactly once when applied."""
    for number, edit in enumerate(edits, start=1):
        count = text.count(edit.old)
        if count != 1:
            where = "does not occur" if count == 0 else f"occurs {count} times"
            raise EditError(
                f"{label}: edit {number} of {len(edits)}: the old text {where} "
                f"(it must occur exactly once):\n{edit.old}"
            )
        if edit.old == edit.new:
            raise EditError(f"{label}: edit {number} of {len(edits)} changes nothing")
        text = text.replace(edit.old, edit.new, 1)
    return text


def source(mutant: Mutant) -> str:
    """The full text of the mutated file."""
    return apply_edits(reference_source(mutant.reference), mutant.edits, label=mutant.id)


def diff(mutant: Mutant, context: int = 3) -> str:
    """Unified diff from the reference to the mutant (``a/name`` -> ``b/name``)."""
    before = reference_source(mutant.reference).splitlines(keepends=True)
    after = source(mutant).splitlines(keepends=True)
    return "".join(
        difflib.unified_diff(
            before, after,
            fromfile=f"a/{mutant.filename}", tofile=f"b/{mutant.filename}", n=context,
        )
    )
