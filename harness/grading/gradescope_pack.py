"""A pack's own distribution inside the Gradescope zip (torch-free): `mtxdiag gradescope build --assignment PACK`
ships the pack's top-level package under pack/ with a pyproject that declares its `mtxdiag.packs` entry point,
and setup.sh pip-installs it after mtxdiag, so the autograder finds the pack as the instructor's machine does.
A pack built into mtxdiag (its distribution is mtxdiag's own) ships with mtxdiag itself."""
from __future__ import annotations

import importlib
from pathlib import Path

from ..assignments import FOUND
from ..packs.discover import GROUP, HOME

FOLDER = "pack"                 # in the zip; /autograder/source/pack on Gradescope
SUFFIXES = (".py", ".json", ".toml", ".txt", ".pt", ".npz", ".npy")
MAX_BYTES = 64 * 1024 * 1024


class PackShipError(ValueError):
    """The pack's package cannot be shipped as it is installed; the message says why."""


def project(assignment: str) -> dict[str, bytes]:
    """{path in the zip: bytes} of the pack's installable project; {} for a built-in assignment or pack."""
    found = next((f for f in FOUND if f.name == assignment and f.pack is not None), None)
    if found is None or found.distribution == HOME:
        return {}
    top = found.value.partition(":")[0].strip().split(".")[0]
    module = importlib.import_module(top)
    where = [Path(p) for p in getattr(module, "__path__", [])] or [Path(str(module.__file__)).parent]
    if len(where) != 1:
        raise PackShipError(f"the pack's package {top} is split over {len(where)} folders; ship it with "
                            f"--requirements instead")
    root = where[0]
    out: dict[str, bytes] = {}
    total = 0
    for f in sorted(root.rglob("*")):
        if f.is_file() and not f.is_symlink() and "__pycache__" not in f.parts and f.suffix in SUFFIXES:
            data = f.read_bytes()
            total += len(data)
            out[f"{FOLDER}/{top}/{f.relative_to(root).as_posix()}"] = data
    if total > MAX_BYTES:
        raise PackShipError(f"the pack's package {top} holds {total / 2**20:.0f} MB; the limit is "
                            f"{MAX_BYTES // 2**20} MB (ship it with --requirements instead)")
    from importlib.metadata import version
    try:
        ver = version(found.distribution)
    except Exception:       # noqa: BLE001 - metadata without a version: the shipped copy's own
        ver = "0"
    out[f"{FOLDER}/pyproject.toml"] = f'''[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

# the {found.distribution} pack as the grader had it installed (written by `mtxdiag gradescope build`)
[project]
name = "{found.distribution}"
version = "{ver}"
requires-python = ">=3.10"

[project.entry-points."{GROUP}"]
{found.name} = "{found.value}"

[tool.setuptools.packages.find]
include = ["{top}", "{top}.*"]

[tool.setuptools.package-data]
"*" = {list("*" + s for s in SUFFIXES if s != ".py")!r}
'''.replace("'", '"').encode()
    return out
