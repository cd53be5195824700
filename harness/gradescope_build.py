"""`mtxdiag gradescope build`: the autograder zip for one assignment, ready to upload to Gradescope.

At the zip's root: setup.sh (Ubuntu packages, a venv, torch's CPU build pinned from PyTorch's CPU wheel index
as https://pytorch.org/get-started/locally/ documents, then this project with the packages the assignment
allows), run_autograder (the `mtxdiag gradescope` entry point on /autograder's folders), rubric.toml, and
mtxdiag/ (the project's packages and pyproject). run_autograder reads AUTOGRADER_ROOT and MTXDIAG_CMD when
set, so the same script runs against a local stand-in of the container (tests/integration/test_gradescope_build.py).
"""
from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

from . import allowed
from .limits import GRADESCOPE_MEMORY_MB, GRADESCOPE_TIMEOUT_S

TORCH_FALLBACK = "2.13.0"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PACKAGES = ("harness", "reference_model", "mutants")


def torch_pin() -> str:
    """The torch version this grader runs (its local tag, e.g. +cpu, dropped), read without importing torch."""
    try:
        from importlib.metadata import version
        return version("torch").split("+")[0]
    except Exception:     # noqa: BLE001 - no torch here: the version the project is tested with
        return TORCH_FALLBACK


def setup_sh(assignment: str, pin: str) -> str:
    extras = " ".join(f"'{p}'" for p in allowed.allowed(assignment))
    return f"""#!/usr/bin/env bash
# Gradescope runs this once while building the image (Ubuntu base). Written by `mtxdiag gradescope build`.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends python3 python3-venv python3-pip bubblewrap
python3 -m venv /opt/mtxdiag-venv
/opt/mtxdiag-venv/bin/pip install --upgrade pip
# torch's CPU build from PyTorch's CPU index: the default Linux wheel pulls several GB of CUDA libraries
/opt/mtxdiag-venv/bin/pip install 'torch=={pin}' --index-url {CPU_INDEX}
/opt/mtxdiag-venv/bin/pip install /autograder/source/mtxdiag
# what the {assignment} assignment allows students to import (harness/allowed.py)
/opt/mtxdiag-venv/bin/pip install {extras}
"""


def run_autograder(assignment: str, timeout: float, memory: int, quick: bool) -> str:
    return f"""#!/usr/bin/env bash
# Gradescope runs this for every submission. Written by `mtxdiag gradescope build`.
set -uo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
MTXDIAG_CMD="${{MTXDIAG_CMD:-/opt/mtxdiag-venv/bin/mtxdiag}}"
mkdir -p "$ROOT/results"
# MTXDIAG_CMD is split into words on purpose (a local stand-in may run `python -m harness`)
exec $MTXDIAG_CMD gradescope \\
  --submission-dir "$ROOT/submission" \\
  --results "$ROOT/results/results.json" \\
  --rubric "$ROOT/source/rubric.toml" \\
  --assignment {assignment} --timeout {timeout:g} --memory {memory}{' --quick' if quick else ''} \\
  --visibility visible --stdout-visibility hidden
"""


def _add(z: zipfile.ZipFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    z.writestr(info, data)


def _pyproject(root: Path) -> bytes:
    """The checkout's pyproject; from an installed wheel (no checkout), a minimal one with the same needs."""
    p = root / "pyproject.toml"
    if p.is_file():
        return p.read_bytes()
    from importlib.metadata import requires, version
    deps = [r for r in (requires("mtxdiag") or []) if "extra ==" not in r]
    return ("[build-system]\nrequires = [\"setuptools>=61\"]\nbuild-backend = \"setuptools.build_meta\"\n\n"
            f"[project]\nname = \"mtxdiag\"\nversion = \"{version('mtxdiag')}\"\nrequires-python = \">=3.10\"\n"
            f"dependencies = {deps!r}\n\n[project.scripts]\nmtxdiag = \"harness.cli:main\"\n\n"
            "[tool.setuptools.packages.find]\ninclude = [\"harness\", \"harness.*\", \"reference_model\", "
            "\"reference_model.*\", \"mutants\", \"mutants.*\"]\n\n[tool.setuptools.package-data]\n"
            "harness = [\"report/templates/*.html\", \"rubric_default.toml\"]\nreference_model = [\"*.json\", "
            "\"*.pt\"]\n").replace("'", '"').encode()


def build(assignment: str, out: Path, *, rubric_path: Path | None = None, timeout: float = GRADESCOPE_TIMEOUT_S,
          memory: int = GRADESCOPE_MEMORY_MB, quick: bool = False) -> list[str]:
    """Write the zip; return the names in it."""
    if assignment not in ("reversal", "block"):
        raise ValueError(f"`mtxdiag gradescope` grades one .py/.ipynb file: reversal or block, not {assignment!r}")
    from . import rubric as rubric_mod
    rub = Path(rubric_path) if rubric_path else rubric_mod.DEFAULT_PATH
    rubric_mod.load(rub)                                 # a bad rubric fails here, not in Gradescope
    root = Path(__file__).resolve().parent.parent
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        _add(z, "setup.sh", setup_sh(assignment, torch_pin()).encode(), 0o755)
        _add(z, "run_autograder", run_autograder(assignment, timeout, memory, quick).encode(), 0o755)
        _add(z, "rubric.toml", rub.read_bytes())
        _add(z, "mtxdiag/pyproject.toml", _pyproject(root))
        readme = root / "README.md"
        _add(z, "mtxdiag/README.md", readme.read_bytes() if readme.is_file() else b"mtxdiag\n")
        for pkg in PACKAGES:
            for f in sorted((root / pkg).rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts and f.suffix in (".py", ".html", ".toml", ".json", ".pt"):
                    _add(z, f"mtxdiag/{f.relative_to(root).as_posix()}", f.read_bytes())
        names = z.namelist()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name("." + out.name + ".tmp")
    tmp.write_bytes(buf.getvalue())
    os.chmod(tmp, 0o644)
    os.replace(tmp, out)
    return names
