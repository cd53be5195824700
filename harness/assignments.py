"""The assignments, declared once: what each is, how a submission of it is recognised and handed in, what it
must define, what it may import, how it is graded and which report sections belong to it.

Torch-free plain data (both sides import it; it imports lm_table, torch-free data, and packs/, the bottom of the
house: the `Assignment` declaration and pack discovery). The CLI, the
engine, the grader, the rubric, Gradescope and the report ask `assignment_of(name)` a question
(`.is_repository`, `.per_component`, `.trains`, `.rubric_table`, ...) instead of comparing names;
`protocol.ASSIGNMENTS` is `NAMES` here. What belongs to an assignment elsewhere names it through these objects:
a probe's `assignments` (harness/child/probes/__init__.py), a cause's (harness/causes/*.py), a mutant's
(mutants/), a report section's (harness/report/sections.py).

A new assignment is best a pack (docs/packs.md): an installed distribution's `mtxdiag.packs` entry point, found at
this module's import (packs/discover.py) and placed in `ALL` (a one-file pack, as `block` is, among the single-file
assignments; a folder's after the repository). Built in by hand (`reversal`, `lm`): one `Assignment(...)` below and
a place in `BY_HAND`; then its probes, causes, mutants, reference (`reference_model/<reference>`) and report sections
name it (ARCHITECTURE.md, "An assignment").
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable

from .lm_table import ADAPTER
from .packs import discover as _discover
from .packs.api import Assignment, Pack
from .packs.checks import ROLE_CHECKS
from .packs.block.pack import ASSIGNMENT as _BLOCK
from .packs.folder import locate

__all__ = ["Assignment", "Pack"]        # declared in packs/api.py; imported from here as before

# the folder a course's student repository is recognised by (its adapters: the contract the course tests)
REPOSITORY_MARKER = "tests/adapters.py"

REVERSAL = Assignment(
    name="reversal",
    title="A mini encoder-decoder transformer that learns to reverse digit sequences.",
    handed_in="the one .py/.ipynb file",
    required=("MiniTransformer",),
    optional=("make_batch", "PositionalEncoding", "MultiHeadAttention", "FeedForward", "EncoderLayer",
              "DecoderLayer", "padding_mask", "target_mask", "train", "greedy_decode"),
    packages=("numpy", "tqdm", "matplotlib"),
    reference="reversal.py",
    trains=True,
    seq2seq=True,
    must_measure=("overfit", "train-trace"),     # the training probes the verdict reads
)
LM = Assignment(
    name="lm",
    title="The decoder-only language model of Stanford CS336 assignment 1, through its test adapters.",
    handed_in="the repository holding tests/adapters.py, graded per component",
    required=tuple(ADAPTER.values()),       # the adapters, in build order (the report's checklist follows it)
    # what CS336 assignment 1's repositories import in model code (pyproject's `lm` extra)
    packages=("einops", "einx", "jaxtyping", "numpy", "regex", "tqdm"),
    reference="lm.py",
    is_repository=True,
    per_component=True,
    rubric_table="lm",
    # not yet: lmdiag's measurements inside a student call then lose properties (get-batch-start-range,
    # measured); lm keeps the contract-name and model-part checks (grader_reach)
    hides_grader=False,
    # every component's check and the brief training (a full check's; --quick does not run it)
    must_measure=tuple(f"lm-{c}" for c in ADAPTER) + ("lm-training",),
)

AUTO = "auto"                          # the CLI's choice: detect it
BY_HAND: tuple[Assignment, ...] = (REVERSAL, LM)     # declared above; every other assignment is a pack

# the installed packs (packs/discover.py; `block` and `cs231n` are this checkout's own), each usable or not
# (`BROKEN`: what is wrong, naming the distribution)
FOUND = _discover.discover(tuple(a.name for a in BY_HAND) + (AUTO,))
PACKS: dict[str, Pack] = {f.name: f.pack for f in FOUND if f.pack is not None}
BROKEN: tuple[str, ...] = tuple(f.error for f in FOUND if f.error)
# the packs whose submission is a folder (the others are one file, checked as the single-file assignments are)
FOLDER_PACKS: tuple[str, ...] = tuple(n for n, p in PACKS.items() if not p.is_file)
_PACKED: dict[str, Assignment] = {
    # a pack's bindings must be measured: one whose role has generic probes (packs/checks.py ROLE_CHECKS) that the
    # child could not run keeps the verdict from clean. A role no generic probe covers yet (`layer`, `training-step`)
    # is reported as a skip that says so, and is not required: its piece is measured only through the model using it
    f.name: replace(f.pack.assignment, pack=f.value,
                    must_measure=f.pack.assignment.must_measure + tuple(
                        f"{b.component}.role" for b in f.pack.bindings if b.role in ROLE_CHECKS))
    for f in FOUND if f.pack is not None}
BLOCK = _PACKED[_BLOCK.name]           # a one-file pack of this checkout (packs/block/pack.py)
# the assignments this checkout ships besides its folder packs (mutants/ holds their mutants)
BUILT_IN: tuple[Assignment, ...] = (REVERSAL, BLOCK, LM)

# in order: the single-file assignments (by hand, then the one-file packs), the repositories, the folder packs.
# Detection order: the first whose markers a single file defines (an lm file defines its adapters; a reversal
# file may define a TransformerBlock too); a file that defines none is checked as DEFAULT. A folder pack is a
# folder (detect_folder), never a single file.
ALL: tuple[Assignment, ...] = (
    tuple(a for a in BY_HAND if not a.is_repository) + tuple(a for n, a in _PACKED.items() if n not in FOLDER_PACKS)
    + tuple(a for a in BY_HAND if a.is_repository) + tuple(a for n, a in _PACKED.items() if n in FOLDER_PACKS))
DETECT_ORDER: tuple[Assignment, ...] = tuple(a for a in ALL if a.is_repository) + tuple(
    a for a in ALL if not a.is_repository and a.name not in FOLDER_PACKS)
DEFAULT = REVERSAL
NAMES: tuple[str, ...] = tuple(a.name for a in ALL)
BY_NAME: dict[str, Assignment] = {a.name: a for a in ALL}
SINGLE_FILE: tuple[str, ...] = tuple(a.name for a in ALL if not a.is_repository and a.name not in FOLDER_PACKS)
REPOSITORY: tuple[str, ...] = tuple(a.name for a in ALL if a.is_repository)
FOLDER: tuple[str, ...] = REPOSITORY + FOLDER_PACKS     # what a folder may be checked as
CHOICES: tuple[str, ...] = (AUTO,) + NAMES

# what an unknown name (None, "auto", a result's garbage) answers: no to every question
UNDECLARED = Assignment(name="", title="", handed_in="", required=(), hides_grader=True)


def assignment_of(name: object) -> Assignment:
    """The declared assignment called `name`; UNDECLARED (no to every question) for anything else."""
    return BY_NAME.get(name, UNDECLARED) if isinstance(name, str) else UNDECLARED


def pack_of(name: object) -> Pack | None:
    """The pack the assignment `name` comes from (a folder's or one file's); None for one declared by hand or an
    unknown name."""
    return PACKS.get(name) if isinstance(name, str) else None


def detect(defines: Callable[[str], bool]) -> str:
    """The assignment a loaded single file is, from the names it defines (`defines(name)`)."""
    return next((a.name for a in DETECT_ORDER if any(defines(n) for n in a.markers)), DEFAULT.name)


def detect_folder(folder: str | Path) -> str | None:
    """The assignment a folder is: a repository (REPOSITORY_MARKER) first, then the packs in order (their first
    file, packs/folder.py); None when it is none of them."""
    folder = Path(folder)
    if REPOSITORY and (folder / REPOSITORY_MARKER).is_file():
        return REPOSITORY[0]
    return detect_pack(folder)


def detect_pack(folder: str | Path) -> str | None:
    """The first pack (in order) whose assignment folder `folder` is (its first file, packs/folder.py)."""
    return next((name for name, pack in PACKS.items() if not pack.is_file and locate(pack, Path(folder)) is not None),
                None)


def for_folder(asked: str, folder: str | Path | None = None) -> str | None:
    """The assignment a folder is checked as when `asked` was asked; None: a folder cannot be. `folder` (when
    given) is looked at to tell a repository from a pack's folder; without it, auto means the repository."""
    if asked == AUTO:
        if folder is not None:
            return detect_folder(folder) or (REPOSITORY[0] if len(REPOSITORY) == 1 else None)
        return REPOSITORY[0] if len(REPOSITORY) == 1 else None
    return asked if asked in FOLDER else None
