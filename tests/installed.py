"""mtxdiag as a user has it: the wheel built from this checkout, installed into a fresh venv (tests of the
installed program: tests/journeys/, tests/integration/test_wheel_install.py).

The venv's site-packages holds hard links to the running interpreter's packages (torch and the other
dependencies: nothing is downloaded) without any .pth file, so neither an editable install's import hook nor the
source tree is on its path; the wheel is then installed into it with pip, as `pip install mtxdiag-*.whl` does."""
from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class CannotInstall(Exception):
    """The machine cannot make such a venv (the reason is the message): the caller skips."""


def build_wheel(out: Path, scratch: Path) -> Path:
    """The wheel of a clean copy of the checkout (no stale build/ of it ends up inside)."""
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, scratch / name)
    for pkg in ("harness", "reference_model", "mutants"):
        shutil.copytree(ROOT / pkg, scratch / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                        "-w", str(out), str(scratch)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    (whl,) = out.glob("mtxdiag-*.whl")
    return whl


def install(wheel: Path, env_dir: Path) -> tuple[Path, Path]:
    """(the venv's python, its site-packages) with the wheel installed."""
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    site = Path(subprocess.check_output([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                        text=True).strip())
    base = Path(sysconfig.get_path("purelib"))
    shutil.rmtree(site)
    if subprocess.run(["cp", "-al", str(base), str(site)], capture_output=True).returncode != 0:
        raise CannotInstall("cannot hard-link the interpreter's packages into a venv here (another file system)")
    for f in {*site.glob("*.pth"), *site.glob("__editable__*"), *site.glob("mtxdiag-*"), site / "harness",
              site / "reference_model", site / "mutants"}:
        if f.is_dir():
            shutil.rmtree(f)
        elif f.exists():
            f.unlink()
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index",
                        "-q", str(wheel)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return py, site
