"""`mtxdiag gradescope build`: the autograder zip for one assignment, ready to upload to Gradescope.

At the zip's root: setup.sh (Ubuntu packages, a venv, torch's CPU build pinned from PyTorch's CPU wheel index
as https://pytorch.org/get-started/locally/ documents, then this project with the packages the assignment
allows), run_autograder (the `mtxdiag gradescope` entry point on /autograder's folders), rubric.toml, and
mtxdiag/ (the project's packages and pyproject). run_autograder reads AUTOGRADER_ROOT and MTXDIAG_CMD when
set, so the same script runs against a local stand-in of the container (tests/integration/test_gradescope_build.py).

reversal and block grade the one .py/.ipynb in the submission; lm grades the student's repository (the folder
holding tests/adapters.py) per component, with the rubric's [lm] table, which the zip's rubric.toml always holds.
An existing --out is replaced only with force=True: the file may be someone's work.
"""
from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

from .. import allowed
from ..identity import PACKAGES
from ..limits import GRADESCOPE_MEMORY_MB, GRADESCOPE_TIMEOUT_S
from ..assignments import NAMES, assignment_of

TORCH_FALLBACK = "2.13.0"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
ASSIGNMENTS = NAMES


class BuildError(ValueError):
    """The zip cannot be written as asked; the message says why."""


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
# Assignment {assignment}: the submission is {assignment_of(assignment).handed_in}.
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
            f"dependencies = {deps!r}\n\n[project.scripts]\nmtxdiag = \"harness.cli.main:main\"\n\n"
            "[tool.setuptools.packages.find]\ninclude = [\"harness\", \"harness.*\", \"reference_model\", "
            "\"reference_model.*\", \"mutants\", \"mutants.*\"]\n\n[tool.setuptools.package-data]\n"
            "harness = [\"report/templates/*.html\", \"rubric_default.toml\"]\nreference_model = [\"*.json\", "
            "\"*.pt\"]\n").replace("'", '"').encode()


def _lm_rubric(text: str, rub) -> str:
    """The rubric text with an [lm] table: the instructor's own, else the bundled default's (what grading would use
    anyway), appended so that the rubric.toml in the zip says what each component earns."""
    if rub.lm:
        return text
    from . import rubric as rubric_mod
    table = rubric_mod.load().lm
    lines = ["", "[lm]", "# per-component credit (the bundled default's; edit here)",
             f"max_score = {table['max_score']:g}", f"interface_credit = {table['interface_credit']:g}",
             f"inherited_credit = {table['inherited_credit']:g}", "", "[lm.components]"]
    lines += [f"{comp} = {pts:g}" for comp, pts in table["components"].items()]
    return text.rstrip("\n") + "\n" + "\n".join(lines) + "\n"


def _check_out(out: Path, force: bool) -> None:
    if out.is_dir():
        raise BuildError(f"--out {out} is a folder; give the zip's file name (e.g. {out / 'autograder.zip'})")
    if out.exists() and not force:
        raise BuildError(f"{out} already exists; nothing was written (use --force to replace it, or another --out)")
    parent = out.parent if str(out.parent) else Path(".")
    probe = parent
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise BuildError(f"cannot write {out}: {probe} is not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise BuildError(f"cannot write {out}: the folder {probe} is not writable")


def build(assignment: str, out: Path, *, rubric_path: Path | None = None, timeout: float = GRADESCOPE_TIMEOUT_S,
          memory: int = GRADESCOPE_MEMORY_MB, quick: bool = False, force: bool = False) -> list[str]:
    """Write the zip; return the names in it. BuildError (bad assignment or --out), RubricError (bad rubric)."""
    if assignment not in ASSIGNMENTS:
        raise BuildError(f"unknown assignment {assignment!r}: `mtxdiag gradescope build` knows "
                         f"{', '.join(ASSIGNMENTS)}")
    out = Path(out)
    _check_out(out, force)
    from . import rubric as rubric_mod
    rub_file = Path(rubric_path) if rubric_path else rubric_mod.DEFAULT_PATH
    rub = rubric_mod.load(rub_file)                      # a bad rubric fails here, not in Gradescope
    rub_text = rub_file.read_text(encoding="utf-8")
    if assignment_of(assignment).rubric_table:       # the per-component table ships filled in
        rub_text = _lm_rubric(rub_text, rub)
        rubric_mod.parse(rub_text, str(rub_file))        # what ships parses, [lm] and all
    root = Path(__file__).resolve().parents[2]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        _add(z, "setup.sh", setup_sh(assignment, torch_pin()).encode(), 0o755)
        _add(z, "run_autograder", run_autograder(assignment, timeout, memory, quick).encode(), 0o755)
        _add(z, "rubric.toml", rub_text.encode("utf-8"))
        _add(z, "mtxdiag/pyproject.toml", _pyproject(root))
        readme = root / "README.md"
        _add(z, "mtxdiag/README.md", readme.read_bytes() if readme.is_file() else b"mtxdiag\n")
        for pkg in PACKAGES:
            for f in sorted((root / pkg).rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts and f.suffix in (".py", ".html", ".toml", ".json", ".pt"):
                    _add(z, f"mtxdiag/{f.relative_to(root).as_posix()}", f.read_bytes())
        names = z.namelist()
    tmp = out.with_name("." + out.name + ".tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(buf.getvalue())
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except OSError as e:
        if tmp.parent.is_dir():
            tmp.unlink(missing_ok=True)
        raise BuildError(f"cannot write {out}: {e.strerror or e}") from None
    return names
