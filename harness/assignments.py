"""The assignments, declared once: what each is, how a submission of it is recognised and handed in, what it
must define, what it may import, how it is graded and which report sections belong to it.

Torch-free plain data (both sides import it; it imports lm_table, torch-free data, and packs/, the bottom of the
house: the `Assignment` declaration and pack discovery). The CLI, the
engine, the grader, the rubric, Gradescope and the report ask `assignment_of(name)` a question
(`.is_repository`, `.per_component`, `.trains`, `.rubric_table`, ...) instead of comparing names;
`protocol.ASSIGNMENTS` is `NAMES` here. What belongs to an assignment elsewhere names it through these objects:
a probe's `assignments` (harness/child/probes/__init__.py), a cause's (harness/causes/*.py), a mutant's
(mutants/), a report section's (harness/report/sections.py).

Every assignment is a pack (harness/packs/api.py, docs/packs.md): an installed distribution's `mtxdiag.packs`
entry point, found at this module's import (packs/discover.py). This checkout's own are `reversal` and `block` (one
file each), `lm` (a repository, through the course's adapters) and `cs231n` (an assignment folder); an
instructor's installs with pip beside them. `ALL` orders them for detection: the one-file packs, the repositories,
the folder packs.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable

from .packs import discover as _discover
from .packs.api import Assignment, Pack
from .packs.checks import ROLE_CHECKS
from .packs.block.pack import ASSIGNMENT as _BLOCK
from .packs.lm.pack import ASSIGNMENT as _LM
from .packs.reversal.pack import ASSIGNMENT as _REVERSAL
from .packs.folder import locate

__all__ = ["Assignment", "Pack"]        # declared in packs/api.py; imported from here as before

AUTO = "auto"                          # the CLI's choice: detect it

# the installed packs (packs/discover.py; reversal, block, lm and cs231n are this checkout's own), each usable or
# not (`BROKEN`: what is wrong, naming the distribution)
FOUND = _discover.discover((AUTO,))
PACKS: dict[str, Pack] = {f.name: f.pack for f in FOUND if f.pack is not None}
BROKEN: tuple[str, ...] = tuple(f.error for f in FOUND if f.error)
# the packs whose submission is an assignment folder (the others are one file or a repository)
FOLDER_PACKS: tuple[str, ...] = tuple(n for n, p in PACKS.items() if p.is_folder)
_PACKED: dict[str, Assignment] = {
    # a pack's bindings must be measured: one whose role has generic probes (packs/checks.py ROLE_CHECKS) that the
    # child could not run keeps the verdict from clean. A role no generic probe covers yet (`layer`, `training-step`)
    # is reported as a skip that says so, and is not required: its piece is measured only through the model using it
    f.name: replace(f.pack.assignment, pack=f.value,
                    must_measure=f.pack.assignment.must_measure + tuple(
                        f"{b.component}.role" for b in f.pack.bindings if b.role in ROLE_CHECKS))
    for f in FOUND if f.pack is not None}
REVERSAL = _PACKED[_REVERSAL.name]     # the lesson's encoder-decoder: one file (packs/reversal/pack.py)
BLOCK = _PACKED[_BLOCK.name]           # the lesson's attention and block: one file (packs/block/pack.py)
LM = _PACKED[_LM.name]                 # CS336 assignment 1: a repository (packs/lm/pack.py)
# the assignments this checkout ships besides its folder packs (mutants/ holds their mutants)
BUILT_IN: tuple[Assignment, ...] = (REVERSAL, BLOCK, LM)
# the path that recognises a repository of each repository pack (its first `files`: the course's adapters)
MARKERS: dict[str, str] = {n: p.files[0] for n, p in PACKS.items() if p.is_repository}
REPOSITORY_MARKER = MARKERS[LM.name]

# in order: the single-file assignments (the one-file packs), the repositories, the folder packs.
# Detection order: the first whose markers a single file defines (an lm file defines its adapters; a reversal
# file may define a TransformerBlock too); a file that defines none is checked as DEFAULT. A folder pack is a
# folder (detect_folder), never a single file.
ALL: tuple[Assignment, ...] = (
    tuple(a for n, a in _PACKED.items() if PACKS[n].is_file) + tuple(a for a in _PACKED.values() if a.is_repository)
    + tuple(a for n, a in _PACKED.items() if n in FOLDER_PACKS))
DETECT_ORDER: tuple[Assignment, ...] = tuple(a for a in ALL if a.is_repository) + tuple(
    a for a in ALL if not a.is_repository and a.name not in FOLDER_PACKS)
DEFAULT = REVERSAL                     # a single file that defines no assignment's names: the lesson's own
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
    """The pack the assignment `name` comes from (a folder's, one file's or a repository's); None for an unknown
    name."""
    return PACKS.get(name) if isinstance(name, str) else None


def folder_pack_of(name: object) -> Pack | None:
    """The pack of `name` when its submission is an assignment folder whose pieces it binds (cs231n's); None for
    a one-file or repository pack and an unknown name."""
    pack = pack_of(name)
    return pack if pack is not None and pack.is_folder else None


def detect(defines: Callable[[str], bool]) -> str:
    """The assignment a loaded single file is, from the names it defines (`defines(name)`)."""
    return next((a.name for a in DETECT_ORDER if any(defines(n) for n in a.markers)), DEFAULT.name)


def detect_folder(folder: str | Path) -> str | None:
    """The assignment a folder is: a repository (its pack's MARKERS path) first, then the folder packs in order
    (their first file, packs/folder.py); None when it is none of them."""
    folder = Path(folder)
    return next((n for n in REPOSITORY if (folder / MARKERS[n]).is_file()), None) or detect_pack(folder)


def detect_pack(folder: str | Path) -> str | None:
    """The first pack (in order) whose assignment folder `folder` is (its first file, packs/folder.py)."""
    return next((name for name, pack in PACKS.items() if pack.is_folder and locate(pack, Path(folder)) is not None),
                None)


def for_folder(asked: str, folder: str | Path | None = None) -> str | None:
    """The assignment a folder is checked as when `asked` was asked; None: a folder cannot be. `folder` (when
    given) is looked at to tell a repository from a pack's folder; without it, auto means the repository."""
    if asked == AUTO:
        if folder is not None:
            return detect_folder(folder) or (REPOSITORY[0] if len(REPOSITORY) == 1 else None)
        return REPOSITORY[0] if len(REPOSITORY) == 1 else None
    return asked if asked in FOLDER else None
