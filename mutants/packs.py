"""The packs' mutants: what each pack declares in `Pack.mutants` ("module:NAME", a sequence of `Mutant`s written as
edits of the pack's reference file), read through the pack API, and each one's submission folder.

A pack's submission is a folder holding the pack's `files` (harness/packs/folder.py), and its reference is one
module that defines every piece; a mutant's folder holds the mutated reference at every one of the pack's paths, so
each binding's target resolves in its own file and the edited lines keep their numbers in each.
"""
from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

from harness.assignments import BUILT_IN, PACKS, folder_pack_of, pack_of
from harness.packs.discover import load

from .model import Mutant, apply_edits, reference_source


class PackMutantsError(ValueError):
    """A pack's `mutants` cannot be read: its module does not import, or it is not a sequence of Mutants of it."""


@lru_cache(maxsize=None)
def of_pack(name: str) -> tuple[Mutant, ...]:
    """The mutants the pack `name` declares (empty when it declares none)."""
    pack = pack_of(name)
    if pack is None or not pack.mutants:
        return ()
    try:
        got = tuple(load(pack.mutants))
    except Exception as e:          # noqa: BLE001 (an instructor's module: say which and why)
        raise PackMutantsError(f"pack {name!r}: its mutants {pack.mutants} cannot be loaded: "
                               f"{type(e).__name__}: {e}") from e
    wrong = [m for m in got if not isinstance(m, Mutant) or m.assignment != name]
    if wrong:
        raise PackMutantsError(f"pack {name!r}: {pack.mutants} holds {len(wrong)} item(s) that are not Mutants of "
                               f"{name!r} (the first: {wrong[0]!r:.120})")
    return got


def _usable(name: str) -> tuple[Mutant, ...]:
    try:
        return of_pack(name)
    except PackMutantsError:
        return ()


def _added() -> tuple[str, ...]:
    """The packs beyond the built-in assignments (a built-in declared as a pack, `block`, keeps its mutants in the
    library's own registry, which its pack names: listing them here too would count them twice)."""
    built_in = {a.name for a in BUILT_IN}
    return tuple(name for name in PACKS if name not in built_in)


def every() -> tuple[Mutant, ...]:
    """Every added pack's usable mutants, in the packs' order (a pack whose mutants cannot be read adds none:
    `problems()` says why)."""
    return tuple(m for name in _added() for m in _usable(name))


def names() -> tuple[str, ...]:
    """The added packs that declare usable mutants."""
    return tuple(name for name in _added() if _usable(name))


def problems() -> list[str]:
    """One sentence per pack whose declared mutants cannot be read."""
    out = []
    for name in PACKS:
        try:
            of_pack(name)
        except PackMutantsError as e:
            out.append(str(e))
    return out


def is_pack_mutant(m: Mutant) -> bool:
    """A folder pack's mutant (exported as the pack's folder); a one-file pack's (block's) is a file as before."""
    pack = pack_of(m.assignment)
    return pack is not None and pack.is_folder


def folder_files(m: Mutant, text: str | None = None) -> dict[str, str]:
    """The mutant's submission folder as {pack path: text}: the mutated reference (or `text`) at every path."""
    pack = folder_pack_of(m.assignment)
    if pack is None:
        raise ValueError(f"{m.id}: {m.assignment!r} is not a pack")
    body = m.source() if text is None else text
    return {rel: body for rel in pack.files}


def reference_files(name: str, reference: str) -> dict[str, str]:
    """The pack's reference as a correct submission folder: its text at every one of the pack's paths."""
    pack = folder_pack_of(name)
    if pack is None:
        raise ValueError(f"{name!r} is not a pack")
    return {rel: reference_source(reference) for rel in pack.files}


def write_folder(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def bug_file(m: Mutant, lines: tuple[int, ...]) -> tuple[str, ...] | None:
    """The pack paths whose bindings own the classes the mutant's edited lines are in (the files a diagnosis of
    it may name: a mutant with edits in two classes has two), or None when no binding's target is such a class."""
    pack = folder_pack_of(m.assignment)
    if pack is None or not lines:
        return None
    text = apply_edits(reference_source(m.reference), m.edits, label=m.id)
    classes = [node for node in ast.parse(text).body if isinstance(node, ast.ClassDef)]
    owners = {node.name for node in classes for line in lines
              if node.lineno <= line <= (node.end_lineno or node.lineno)}
    files: list[str] = []
    for b in pack.bindings:
        module, _, qual = b.target.partition(":")
        rel = module.replace(".", "/") + ".py"
        if qual.split(".")[0] in owners and rel in pack.files and rel not in files:
            files.append(rel)
    return tuple(files) or None
    text = apply_edits(reference_source(m.reference), m.edits, label=m.id)
    owner = next((node.name for node in ast.parse(text).body if isinstance(node, ast.ClassDef)
                  and node.lineno <= lines[0] <= (node.end_lineno or node.lineno)), None)
    for b in pack.bindings:
        module, _, qual = b.target.partition(":")
        if owner and qual.split(".")[0] == owner:
            rel = module.replace(".", "/") + ".py"
            return rel if rel in pack.files else None
    return None
