"""Write mutants as anonymous submission files plus an instructor's manifest.

File names carry no hint of the bug: ``submission_07.py``, numbered by a
deterministic shuffle (seeded by SHUFFLE_SEED). ``manifest.json`` and
``manifest.csv`` map each file to its mutant id, cause and assignment. Nothing
is overwritten unless ``force`` is given. An `lm` mutant is written in both of
its assignment's forms: ``submission_07.py`` (one file) and ``submission_07/``
(a repository: tests/adapters.py + cs336_basics/), each with a manifest row. A pack's mutant is a folder only,
``submission_07/`` holding the pack's files (mutants/packs.py): a pack's submission is never one file.
"""
from __future__ import annotations

import csv
import io
import json
import random
from pathlib import Path

from harness.assignments import assignment_of

from . import lm_export, packs
from .model import Mutant, source

SHUFFLE_SEED = 20240607
MANIFEST_JSON = "manifest.json"
MANIFEST_CSV = "manifest.csv"
MANIFEST_FIELDS = ("file", "id", "cause", "assignment", "reference")


class ExportError(Exception):
    """Export refused (files would be overwritten)."""

    def __init__(self, message: str, existing: list[Path]):
        super().__init__(message)
        self.existing = existing


def plan_export(mutants: tuple[Mutant, ...] | list[Mutant]) -> list[tuple[str, Mutant]]:
    """(file name, mutant) pairs, in file-name order.

    The order is a shuffle of the mutants sorted by id, seeded by SHUFFLE_SEED, so
    the same set of mutants always gets the same numbers.
    """
    ordered = sorted(mutants, key=lambda m: m.id)
    random.Random(SHUFFLE_SEED).shuffle(ordered)
    width = max(2, len(str(len(ordered))))
    return [(f"submission_{n:0{width}d}.py", m) for n, m in enumerate(ordered, start=1)]


def _folder(name: str) -> str:
    """The repository form's folder of a submission file: submission_07.py -> submission_07."""
    return name[:-len(".py")]


def _manifest_rows(plan: list[tuple[str, Mutant]]) -> list[dict[str, str]]:
    rows = []
    for name, m in plan:
        names = [name] + ([_folder(name) + "/"] if assignment_of(m.assignment).is_repository else [])
        if packs.is_pack_mutant(m):
            names = [_folder(name) + "/"]
        rows += [{"file": n, "id": m.id, "cause": m.cause, "assignment": m.assignment,
                  "reference": m.reference} for n in names]
    return rows


def export_submissions(directory: str | Path, mutants, force: bool = False) -> list[tuple[str, Mutant]]:
    """Write every mutant to ``directory`` and the manifests; return the plan.

    Raises ExportError, writing nothing, if any file it would write exists and
    ``force`` is false.
    """
    directory = Path(directory)
    plan = plan_export(mutants)
    targets = [directory / name for name, m in plan if not packs.is_pack_mutant(m)]
    targets += [directory / MANIFEST_JSON, directory / MANIFEST_CSV]
    targets += [directory / _folder(name) for name, m in plan
                if assignment_of(m.assignment).is_repository or packs.is_pack_mutant(m)]
    existing = [p for p in targets if p.exists()]
    if existing and not force:
        shown = ", ".join(p.name for p in existing[:5]) + (" ..." if len(existing) > 5 else "")
        raise ExportError(
            f"{len(existing)} file(s) already exist in {directory} ({shown}); "
            "refusing to overwrite them (use --force to replace them)", existing)
    texts = {name: (lm_export.mutant_single_file(m) if assignment_of(m.assignment).is_repository else _as_submission(source(m), m.assignment))
             for name, m in plan if not packs.is_pack_mutant(m)}  # build all before writing
    for name, m in plan:
        if packs.is_pack_mutant(m):
            text = _as_submission(source(m), m.assignment)
            texts.update({f"{_folder(name)}/{rel}": body for rel, body in packs.folder_files(m, text).items()})
        if assignment_of(m.assignment).is_repository:
            texts.update({f"{_folder(name)}/{path}": text for path, text in lm_export.mutant_repo_files(m).items()})
    rows = _manifest_rows(plan)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=MANIFEST_FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)

    directory.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text, encoding="utf-8")
    manifest = {row["file"]: {k: row[k] for k in MANIFEST_FIELDS if k != "file"} for row in rows}
    (directory / MANIFEST_JSON).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    (directory / MANIFEST_CSV).write_text(buffer.getvalue(), encoding="utf-8")
    return plan


def _as_submission(text: str, assignment: str) -> str:
    """The mutant as a student's file: the reference's module docstring (which says it is the reference,
    and so gives the exercise away) becomes a neutral one."""
    import ast
    tree = ast.parse(text)
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        lines = text.splitlines(keepends=True)
        title = assignment_of(assignment).title
        text = f'"""{title}"""\n' + "".join(lines[first.end_lineno:])
    return text
