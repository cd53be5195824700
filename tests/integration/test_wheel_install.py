"""A non-editable install checks the lesson clean under bubblewrap (issue 27 item 1).

The wheel is built from this checkout and installed into a fresh venv whose site-packages also holds torch and
the other dependencies: hard links to the running interpreter's packages (nothing is downloaded; no .pth file
is carried, so neither an editable install's import hook nor the base site folder is on the venv's path). Torch
then lives only inside the venv's lib/, the case where the sandbox used to lose it. `mtxdiag check` runs from
the venv's console script under bubblewrap.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from harness.grading.toml_write import tomllib
from harness.isolation import sandbox
from installed import CannotInstall, build_wheel, install

ROOT = Path(__file__).resolve().parents[2]


def _need_bwrap():
    if not sandbox.available():
        if os.environ.get("MTXDIAG_ISOLATE") == "bwrap":
            pytest.fail("bubblewrap required (MTXDIAG_ISOLATE=bwrap) but unusable: " + sandbox.unavailable_reason())
        pytest.skip("bubblewrap unusable here: " + sandbox.unavailable_reason())


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"), tmp_path_factory.mktemp("src"))


def test_wheel_holds_every_package_and_data_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for pkg in ("harness", "reference_model", "mutants"):
        for f in (ROOT / pkg).rglob("*"):
            if "__pycache__" in f.parts or f.is_dir():
                continue
            rel = f.relative_to(ROOT).as_posix()
            if f.suffix in (".py", ".html", ".toml", ".json", ".pt"):
                assert rel in names, f"{rel} is not in the wheel"


def _venv_with(wheel: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    """(venv, its python, its site-packages): the wheel installed over hard links of this interpreter's packages."""
    env_dir = tmp_path / "venv"
    try:
        py, site = install(wheel, env_dir)
    except CannotInstall as e:
        pytest.skip(str(e))
    return env_dir, py, site


def test_wheel_install_checks_the_lesson_clean_under_bwrap(wheel, tmp_path):
    _need_bwrap()
    env_dir, py, site = _venv_with(wheel, tmp_path)
    where = subprocess.check_output([str(py), "-c", "import harness; print(harness.__file__)"], text=True,
                                    cwd=tmp_path).strip()
    assert where.startswith(str(site)), f"harness imported from {where}, not the installed wheel"
    torch_at = subprocess.check_output([str(py), "-c", "import torch; print(torch.__file__)"], text=True,
                                       cwd=tmp_path).strip()
    assert torch_at.startswith(str(site)), torch_at
    # inside the sandbox the venv is the interpreter's world: torch from its lib/, mtxdiag's installed
    # packages hidden (the child reads the .py snapshot under /opt/mtxdiag)
    probe = ("import os, sys, tempfile\nfrom pathlib import Path\nfrom harness.isolation import sandbox, scratch\n"
             "work = Path(tempfile.mkdtemp())\n"
             "code = 'import os, torch, harness; print(torch.__file__); print(harness.__file__); "
             "print(sorted(os.listdir(os.path.join(os.path.dirname(torch.__file__), \"..\", \"harness\"))))'\n"
             "cmd = sandbox.command([sys.executable, '-c', code], work=work, isolate='bwrap')\n"
             "os.execvpe(cmd[0], cmd, scratch.env(1, work, 'bwrap', 'probe'))\n")
    r = subprocess.run([str(py), "-c", probe], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    torch_in, harness_in, installed = r.stdout.strip().splitlines()
    assert torch_in.startswith(str(site)), f"the sandboxed child imported torch from {torch_in}"
    assert harness_in.startswith(sandbox.RUNTIME_MOUNT), harness_in
    assert installed == "[]", f"the installed harness package is visible in the sandbox: {installed}"

    out = tmp_path / "r.json"
    env = dict(os.environ, MTXDIAG_ISOLATE="bwrap", MTXDIAG_DAEMON="0", PYTHONPATH="")
    r = subprocess.run([str(env_dir / "bin" / "mtxdiag"), "check", str(ROOT / "submissions" / "reversal_lesson.py"),
                        "--quick", "--no-daemon", "--json", str(out), "--html", str(tmp_path / "r.html")],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    data = json.loads(out.read_text())
    assert data["verdict"] == "clean", (data.get("verdict"), data.get("error"), r.stdout[-3000:], r.stderr[-3000:])
    assert r.returncode == 0


def _norm(req: str) -> str:
    return re.sub(r"\s+", "", req.replace("'", '"'))


def test_a_zip_built_from_the_wheel_install_ships_a_pyproject_that_builds(wheel, tmp_path):
    """The no-checkout path: `mtxdiag gradescope build` from the installed wheel writes the zip's pyproject from
    the distribution's metadata; it parses, holds the project's dependencies, and setup.sh's install step (a
    build of mtxdiag/ with setuptools) succeeds and packs the data files."""
    env_dir, py, site = _venv_with(wheel, tmp_path)
    out = tmp_path / "autograder.zip"
    env = dict(os.environ, MTXDIAG_DAEMON="0", PYTHONPATH="")
    r = subprocess.run([str(env_dir / "bin" / "mtxdiag"), "gradescope", "build", "--assignment", "reversal",
                        "--quick", "--out", str(out)], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    z = zipfile.ZipFile(out)
    text = z.read("mtxdiag/pyproject.toml")
    assert text != (ROOT / "pyproject.toml").read_bytes()          # written from the metadata, not copied
    doc = tomllib.loads(text.decode("utf-8"))                        # setup.sh's TOMLDecodeError
    want = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert sorted(map(_norm, doc["project"]["dependencies"])) == sorted(map(_norm, want["dependencies"]))
    assert doc["project"]["scripts"] == want["scripts"]
    src = tmp_path / "source"
    z.extractall(src)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                        "-w", str(tmp_path / "built"), str(src / "mtxdiag")], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    (built,) = (tmp_path / "built").glob("mtxdiag-*.whl")
    names = set(zipfile.ZipFile(built).namelist())
    assert {"harness/grading/rubric_default.toml", "harness/cli/main.py", "reference_model/reversal.py"} <= names
