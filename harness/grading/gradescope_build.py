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
import re
import shlex
import zipfile
from pathlib import Path

from .. import allowed
from ..identity import PACKAGES
from ..limits import GRADESCOPE_MEMORY_MB, GRADESCOPE_TIMEOUT_S
from ..assignments import NAMES, assignment_of
from . import gradescope_extras as extras
from . import toml_write
from .gradescope_extras import FILES_DIR
from .gradescope_pack import FOLDER as PACK_FOLDER
from .gradescope_pack import PackShipError, project
from .toml_write import tomllib

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


def setup_sh(assignment: str, pin: str, requirements: bool = False, pack: bool = False) -> str:
    """Gradescope's setup.sh. Its paths are parameters with Gradescope's as defaults: AUTOGRADER_ROOT
    (/autograder), MTXDIAG_VENV (/opt/mtxdiag-venv), MTXDIAG_PYTHON (python3). MTXDIAG_SETUP_LOCAL=1 is the local
    stand-in's (`mtxdiag gradescope run`): no apt-get, a venv that sees the interpreter's packages (torch is not
    downloaded again), the project built with the setuptools already there. `requirements`: the zip's
    requirements.txt is installed last, with constraints.txt holding torch at the pin. `pack`: the zip's pack/
    (an installed pack's own distribution, gradescope_pack.py) is installed after mtxdiag."""
    q = shlex.quote
    extras = " ".join(q(p) for p in allowed.allowed(assignment))
    packed = f"""# the {assignment} pack's own distribution (the instructor's, as installed where the zip was built)
"${{PIP[@]}}" install ${{BUILD[@]+"${{BUILD[@]}}"}} --no-deps "$ROOT/source/{PACK_FOLDER}"
""" if pack else ""
    own = """# the instructor's requirements (gradescope build --requirements); constraints.txt holds torch at its pin
"${PIP[@]}" install -r "$ROOT/source/requirements.txt" -c "$ROOT/source/constraints.txt"
""" if requirements else ""
    return f"""#!/usr/bin/env bash
# Gradescope runs this once while building the image (Ubuntu base). Written by `mtxdiag gradescope build`.
set -euo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
VENV="${{MTXDIAG_VENV:-/opt/mtxdiag-venv}}"
PYTHON="${{MTXDIAG_PYTHON:-python3}}"
PIP=("$VENV/bin/pip")
BUILD=()
if [ "${{MTXDIAG_SETUP_LOCAL:-0}}" = 1 ]; then
  # a local stand-in of the container (`mtxdiag gradescope run`): no root, no apt-get; the venv sees this
  # interpreter's packages and has none of its own to shadow them (no pip or setuptools: this pip installs)
  "$PYTHON" -m venv --system-site-packages --without-pip "$VENV"
  # an interpreter that is itself a venv's has its packages outside the "system" ones: the venv lists them too
  SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
  "$PYTHON" -c 'import site; print("\\n".join(site.getsitepackages()))' > "$SITE/mtxdiag-local.pth"
  PIP=("$PYTHON" -m pip --python "$VENV/bin/python")
  BUILD=(--no-build-isolation)
  export PIP_DISABLE_PIP_VERSION_CHECK=1
else
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends python3 python3-venv python3-pip bubblewrap
  "$PYTHON" -m venv "$VENV"
  "${{PIP[@]}}" install --upgrade pip
fi
# torch's CPU build from PyTorch's CPU index: the default Linux wheel pulls several GB of CUDA libraries
"${{PIP[@]}}" install {q('torch==' + pin)} --index-url {q(CPU_INDEX)}
"${{PIP[@]}}" install ${{BUILD[@]+"${{BUILD[@]}}"}} "$ROOT/source/mtxdiag"
{packed}# what the {assignment} assignment allows students to import (harness/allowed.py)
"${{PIP[@]}}" install {extras}
{own}"""


def run_autograder(assignment: str, timeout: float, memory: int, quick: bool, *, files: bool = False,
                   points: float | None = None) -> str:
    """Gradescope's run_autograder: AUTOGRADER_ROOT, MTXDIAG_VENV and MTXDIAG_CMD as in setup_sh. `files`: the
    zip's files/ are copied beside the submission; `points`: the grade scaled to that many points."""
    q = shlex.quote
    args = f"--assignment {q(assignment)} --timeout {q(format(timeout, 'g'))} --memory {q(str(int(memory)))}"
    more = (f' \\\n  --files-dir "$ROOT/source/{FILES_DIR}"' if files else "") + \
        (f" \\\n  --points {q(format(points, 'g'))}" if points else "")
    return f"""#!/usr/bin/env bash
# Gradescope runs this for every submission. Written by `mtxdiag gradescope build`.
# Assignment {assignment}: the submission is {assignment_of(assignment).handed_in}.
set -uo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
VENV="${{MTXDIAG_VENV:-/opt/mtxdiag-venv}}"
MTXDIAG_CMD="${{MTXDIAG_CMD:-$VENV/bin/mtxdiag}}"
mkdir -p "$ROOT/results"
# MTXDIAG_CMD is split into words on purpose (a local stand-in may run `python -m harness`)
exec $MTXDIAG_CMD gradescope \\
  --submission-dir "$ROOT/submission" \\
  --results "$ROOT/results/results.json" \\
  --rubric "$ROOT/source/rubric.toml" \\
  {args}{' --quick' if quick else ''}{more} \\
  --stdout-visibility hidden
"""


def _add(z: zipfile.ZipFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    z.writestr(info, data)


# what setuptools needs that an installed distribution's metadata does not say (the project's pyproject:
# tests/unit/test_gradescope_pyproject.py holds these to it)
PACKAGES_FIND = {"include": [name for pkg in PACKAGES for name in (pkg, f"{pkg}.*")]}
PACKAGE_DATA = {"harness": ["report/templates/*.html", "grading/rubric_default.toml"],
                "reference_model": ["*.json", "*.pt"]}
_EXTRA = re.compile(r"""\s*(?:\band\s+)?\bextra\s*==\s*["']([^"']+)["']""")


def split_requires(requires: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """Requires-Dist lines (`tomli>=2.0; python_version < "3.11"`, `pytest>=7; extra == "test"`) as the
    pyproject's dependencies and optional-dependencies."""
    deps: list[str] = []
    extras: dict[str, list[str]] = {}
    for line in requires:
        req, _, marker = line.partition(";")
        m = _EXTRA.search(marker)
        if m is None:
            deps.append(line.strip())
            continue
        rest = (marker[:m.start()] + marker[m.end():]).strip()
        rest = re.sub(r"^and\s+|\s+and$", "", rest).strip()
        extras.setdefault(m.group(1), []).append(req.strip() + (f"; {rest}" if rest else ""))
    return deps, extras


def pyproject_doc(version: str, requires_python: str | None, requires: list[str],
                  entry_points: list[tuple[str, str, str]]) -> dict:
    """The pyproject of an installed distribution, from its metadata: entry_points is (group, name, value)."""
    deps, extras = split_requires(requires)
    project: dict = {"name": "mtxdiag", "version": version}
    if requires_python:
        project["requires-python"] = requires_python
    project["dependencies"] = deps
    if extras:
        project["optional-dependencies"] = extras
    groups: dict[str, dict[str, str]] = {}
    for group, name, val in entry_points:
        groups.setdefault(group, {})[name] = val
    if "console_scripts" in groups:
        project["scripts"] = groups.pop("console_scripts")
    if groups:
        project["entry-points"] = groups
    return {"build-system": {"requires": ["setuptools>=61"], "build-backend": "setuptools.build_meta"},
            "project": project,
            "tool": {"setuptools": {"packages": {"find": PACKAGES_FIND}, "package-data": PACKAGE_DATA}}}


def _checkout_pyproject(root: Path) -> bytes | None:
    """The checkout's own pyproject.toml, when root is mtxdiag's checkout (not, say, a site-packages folder)."""
    p = root / "pyproject.toml"
    if not p.is_file():
        return None
    data = p.read_bytes()
    try:
        name = tomllib.loads(data.decode("utf-8")).get("project", {}).get("name")
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    return data if name == "mtxdiag" else None


def _pyproject(root: Path) -> bytes:
    """The checkout's pyproject; from an installed wheel (no checkout), one written from the installed
    distribution's metadata with the same dependencies and entry points."""
    own = _checkout_pyproject(root)
    if own is not None:
        return own
    from importlib.metadata import distribution
    dist = distribution("mtxdiag")
    doc = pyproject_doc(dist.version, dist.metadata["Requires-Python"], list(dist.requires or []),
                        [(e.group, e.name, e.value) for e in dist.entry_points])
    return toml_write.dumps(doc).encode("utf-8")


def _lm_rubric(text: str, rub) -> str:
    """The rubric text with an [lm] table: the instructor's own, else the bundled default's (what grading would use
    anyway), appended (written by toml_write) so that the rubric.toml in the zip says what each component earns."""
    if rub.lm:
        return text
    from . import rubric as rubric_mod
    table = rubric_mod.load().lm
    lm = {"max_score": table["max_score"], "interface_credit": table["interface_credit"],
          "inherited_credit": table["inherited_credit"], "components": dict(table["components"])}
    return text.rstrip("\n") + "\n\n# per-component credit (the bundled default's; edit here)\n" + \
        toml_write.dumps({"lm": lm})


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
          memory: int = GRADESCOPE_MEMORY_MB, quick: bool = False, force: bool = False, files=(),
          requirements: Path | None = None, points: float | None = None) -> list[str]:
    """Write the zip; return the names in it. BuildError (bad assignment, --out, --files, --requirements or
    --points), RubricError (bad rubric). gradescope_extras.py says what --files and --requirements accept."""
    if assignment not in ASSIGNMENTS:
        raise BuildError(f"unknown assignment {assignment!r}: `mtxdiag gradescope build` knows "
                         f"{', '.join(ASSIGNMENTS)}")
    out = Path(out)
    _check_out(out, force)
    from . import rubric as rubric_mod
    rub_file = Path(rubric_path) if rubric_path else rubric_mod.DEFAULT_PATH
    rub = rubric_mod.with_points(rubric_mod.load(rub_file), points)    # a bad rubric fails here, not in Gradescope
    try:
        shipped = extras.files(files) if files else []
        reqs = extras.requirements(Path(requirements)) if requirements else None
        packed = project(assignment)            # an installed pack's own distribution (gradescope_pack.py)
    except (extras.ExtrasError, PackShipError) as e:
        raise BuildError(str(e)) from None
    if out.resolve() in {p.resolve() for p, _ in shipped}:
        raise BuildError(f"--files {out}: the zip being written cannot ship itself")
    rub_text = rub_file.read_text(encoding="utf-8")
    if assignment_of(assignment).rubric_table:       # the per-component table ships filled in
        rub_text = _lm_rubric(rub_text, rub)
        rubric_mod.parse(rub_text, str(rub_file))        # what ships parses, [lm] and all
    root = Path(__file__).resolve().parents[2]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        _add(z, "setup.sh", setup_sh(assignment, torch_pin(), reqs is not None, bool(packed)).encode(), 0o755)
        _add(z, "run_autograder", run_autograder(assignment, timeout, memory, quick, files=bool(shipped),
                                                 points=rub.total if points else None).encode(), 0o755)
        _add(z, "rubric.toml", rub_text.encode("utf-8"))
        if reqs is not None:
            _add(z, "requirements.txt", reqs.encode("utf-8"))
            _add(z, "constraints.txt", f"torch=={torch_pin()}\n".encode())
        for path, name in shipped:
            _add(z, name, path.read_bytes())
        for name, data in packed.items():
            _add(z, name, data)
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
