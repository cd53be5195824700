"""Finding the installed packs: the `mtxdiag.packs` entry point group, each pack loaded and validated.

Torch-free (harness/assignments.py runs it once, at its import, on both sides of the process boundary). A pack is
a module attribute named by an entry point of its distribution:

    [project.entry-points."mtxdiag.packs"]
    minicourse = "minicourse_pack.pack:PACK"

A pack that cannot be used (its module does not import, the attribute is not a `Pack`, its declaration
contradicts itself, its name is taken) is `Found` with an `error` naming its distribution, and left out; it never
hides another pack nor stops a check (`mtxdiag assignment list` and `check` say what is wrong with it).
"""
from __future__ import annotations

import importlib
import os
import re
import sys
from dataclasses import dataclass
from functools import lru_cache

from .api import SUBMISSIONS, Pack

GROUP = "mtxdiag.packs"
# The packs this checkout holds, as (name, "module:ATTR"). pyproject.toml declares each in the entry point group
# as well, so an installed mtxdiag finds them as any pack is found; they are also listed here because an
# editable install's metadata is only as fresh as its last `pip install -e` (a pack added since is in the source
# tree, not in the metadata). Entry points of the same name from mtxdiag's own distribution are the same packs
# and are not loaded twice.
# In this order: a single file is detected as the first one-file pack whose names it defines (a reversal file may
# define a TransformerBlock too), a folder as the repository before the folder packs.
BUILT_IN: tuple[tuple[str, str], ...] = (("reversal", "harness.packs.reversal.pack:PACK"),
                                         ("block", "harness.packs.block.pack:PACK"),
                                         ("lm", "harness.packs.lm.pack:PACK"),
                                         ("cs231n", "harness.packs.cs231n.pack:PACK"))
HOME = "mtxdiag"                 # this distribution's name (its entry points are BUILT_IN's)
NAME = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


@dataclass(frozen=True)
class Found:
    """One declared pack: usable (`pack`) or not (`error`, one sentence naming the distribution)."""
    name: str
    value: str                  # "module:ATTR"
    distribution: str
    pack: Pack | None = None
    error: str = ""


def any_declared() -> bool:
    """Whether any distribution on sys.path declares the group (its entry_points.txt names it): a few ms, where
    importlib.metadata's full scan costs every mtxdiag process (both sides) ~50-100 ms more at its start."""
    for folder in sys.path:
        try:
            entries = os.scandir(folder or ".")
        except OSError:
            continue
        with entries:
            for e in entries:
                if not e.name.endswith((".dist-info", ".egg-info")):
                    continue
                try:
                    with open(os.path.join(e.path, "entry_points.txt"), encoding="utf-8", errors="replace") as f:
                        if GROUP in f.read():
                            return True
                except OSError:
                    continue
    return False


def declared() -> list[tuple[str, str, str]]:
    """(name, "module:ATTR", distribution) of every entry point of the group, built-in packs first."""
    out = [(name, value, HOME) for name, value in BUILT_IN]
    try:
        from importlib.metadata import entry_points
        eps = list(entry_points(group=GROUP)) if any_declared() else []
    except Exception:       # a broken distribution's metadata: the built-in packs are still found
        eps = []
    for ep in sorted(eps, key=lambda e: (getattr(getattr(e, "dist", None), "name", "") or "", e.name)):
        dist = getattr(getattr(ep, "dist", None), "name", None) or "an unnamed distribution"
        out.append((ep.name, ep.value, dist))
    return out


def load(value: str) -> object:
    """The object "module:ATTR" names (the module imported)."""
    module, _, attr = value.partition(":")
    obj: object = importlib.import_module(module.strip())
    for part in attr.strip().split("."):
        obj = getattr(obj, part)
    return obj


def problems(pack: object, name: str, reserved: tuple[str, ...] = ()) -> list[str]:
    """What is wrong with a declared pack (empty: usable). `name` is its entry point's name."""
    if not isinstance(pack, Pack):
        return [f"it is a {type(pack).__name__}, not a harness.packs.api.Pack"]
    out = []
    a = pack.assignment
    if a.name != name:
        out.append(f"its assignment is called {a.name!r} but its entry point {name!r}")
    if not NAME.match(a.name):
        out.append(f"its name {a.name!r} is not lower-case letters, digits, '-' or '_' (at most 40)")
    if a.name in reserved:
        out.append(f"its name {a.name!r} is an assignment built into the harness")
    if a.pack:
        out.append("its Assignment sets `pack`, which discovery sets")
    if a.is_repository != (pack.submission == "repository"):
        out.append("its Assignment's `is_repository` and its `submission` disagree (a repository pack sets both)")
    if pack.split not in ("", "on", "off", "trial") or pack.split in ("on", "trial") and pack.is_repository:
        out.append(f"its `split` must be '', 'on', 'off' or 'trial' (a repository pack: not split yet), "
                   f"not {pack.split!r}")
    if pack.submission not in SUBMISSIONS:
        out.append(f"its `submission` must be one of {SUBMISSIONS}, not {pack.submission!r}")
    elif pack.is_file:
        out.extend(_file_problems(pack))
    elif pack.is_repository:
        out.extend(_repository_problems(pack))
    else:
        if not pack.files:
            out.append("it declares no `files` (the paths that recognise its submission folder)")
        if not pack.bindings:
            out.append("it binds nothing (`bindings`: the pieces of the student's code the probes call)")
    if any(f.startswith("/") or ".." in f.split("/") or not f.endswith(".py") for f in pack.files):
        out.append("its `files` must be relative paths of .py files inside the submission folder")
    editions = [e.name for e in pack.editions]
    if len(set(editions)) != len(editions):
        out.append("two editions share a name")
    comps = [b.component for b in pack.bindings]
    for c in sorted({c for c in comps if comps.count(c) > 1}):
        out.append(f"the component {c!r} is bound twice")
    for b in pack.bindings:
        unknown = [e for e in b.editions if e not in editions]
        if unknown:
            out.append(f"{b.component} names editions it does not declare: {', '.join(unknown)}")
        if b.points < 0:
            out.append(f"{b.component}'s points are negative")
    for e in pack.editions:
        unknown = [c for c in e.student if c not in comps]
        if unknown:
            out.append(f"edition {e.name} names components it does not bind: {', '.join(unknown)}")
    for what in ("probes", "causes", "mutants", "sections"):
        v = getattr(pack, what)
        if v and not TARGET.match(v):
            out.append(f"its `{what}` must be 'module:NAME', not {v!r}")
    if pack.reference and not re.match(r"^[A-Za-z_][\w.]*$", pack.reference):
        out.append(f"its `reference` must be a dotted module name, not {pack.reference!r}")
    return out


def _file_problems(pack: Pack) -> list[str]:
    """What a one-file pack (Pack.submission "file") must declare: the names that recognise its file, its probes;
    no folder's `files`, `bindings` or `editions` (a binding is imported from a folder)."""
    out = []
    if not pack.assignment.required:
        out.append("a one-file pack's assignment requires no names (`required`: the names that recognise its file)")
    if not pack.probes:
        out.append("a one-file pack declares no `probes` (every probe its check runs, in order)")
    if pack.files or pack.bindings or pack.editions:
        out.append("a one-file pack declares `files`, `bindings` or `editions`, which only a folder's pack has")
    return out


def _repository_problems(pack: Pack) -> list[str]:
    """What a repository pack must declare: the path that recognises the repository (its first `files`: the
    course's adapters), the adapters (`required`), its probes; no bindings or editions."""
    out = []
    if not pack.files:
        out.append("a repository pack declares no `files` (its first: the path that recognises the repository)")
    if not pack.assignment.required:
        out.append("a repository pack's assignment requires no names (`required`: the course's adapters)")
    if not pack.probes:
        out.append("a repository pack declares no `probes` (every probe its check runs, in order)")
    if pack.bindings or pack.editions:
        out.append("a repository pack declares `bindings` or `editions`, which only a folder's pack has")
    return out


@lru_cache(maxsize=None)
def discover(reserved: tuple[str, ...] = ()) -> tuple[Found, ...]:
    """Every declared pack, in the order declared (built-in first, then by distribution), each usable or not;
    a name declared twice is used once (mtxdiag's own entry points are BUILT_IN's; another distribution's is an
    error)."""
    out: list[Found] = []
    taken: dict[str, str] = {}
    for name, value, dist in declared():
        if name in taken:
            if dist == HOME and taken[name] == HOME:
                continue           # the built-in pack again, from the (perhaps stale) installed metadata
            out.append(Found(name, value, dist, error=f"pack {name!r} of {dist} is not used: the name is taken by "
                                                      f"{taken[name]}"))
            continue
        try:
            pack = load(value)
        except (Exception, SystemExit) as e:
            out.append(Found(name, value, dist, error=f"pack {name!r} of {dist} cannot be loaded from {value}: "
                                                      f"{type(e).__name__}: {str(e)[:300]}"))
            continue
        wrong = problems(pack, name, reserved)
        if wrong:
            out.append(Found(name, value, dist, error=f"pack {name!r} of {dist} ({value}) is not used: "
                                                      + "; ".join(wrong)))
            continue
        assert isinstance(pack, Pack)          # problems() said so
        taken[name] = dist
        out.append(Found(name, value, dist, pack=pack))
    return tuple(out)
