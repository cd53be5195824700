"""The journey tier: mtxdiag as its users run it (issue 44 item 1).

The wheel is built from this checkout and installed into a fresh venv (tests/installed.py: no editable install,
no source tree on the path); every command runs from that venv's `mtxdiag` console script, in a folder of the
user's own outside the checkout, with the default flags a user types (the check daemon on, the sandbox as the
machine allows). Each journey asserts what the user sees: the exit status, the terminal's words, the files
written, and that no output shows `None`, `nan` or text cut mid-word (tests/output_scan.py)."""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from installed import CannotInstall, build_wheel, install


@dataclass
class User:
    """A user's shell: the installed program, a private HOME and daemon folder, and a working folder."""
    bin: Path
    home: Path
    env: dict

    def run(self, *args, cwd: Path, timeout: float = 600, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.bin / "mtxdiag"), *map(str, args)], cwd=cwd, env=self.env, text=True,
                              capture_output=True, timeout=timeout, input=stdin)

    def popen(self, *args, cwd: Path) -> subprocess.Popen:
        return subprocess.Popen([str(self.bin / "mtxdiag"), *map(str, args)], cwd=cwd, env=self.env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)


@pytest.fixture(scope="session")
def user(tmp_path_factory):
    base = tmp_path_factory.mktemp("journeys")
    wheel = build_wheel(base / "dist", Path(tmp_path_factory.mktemp("src")))
    try:
        py, _ = install(wheel, base / "venv")
    except CannotInstall as e:
        pytest.skip(str(e))
    home = base / "home"
    home.mkdir()
    runtime = base / "run"
    runtime.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MTXDIAG_DAEMON", "VIRTUAL_ENV")}
    # a user's daemon, in a folder of this session's own (never one a developer's shell started)
    env.update(HOME=str(home), MTXDIAG_RUNTIME_DIR=str(runtime), PATH=f"{py.parent}:{env.get('PATH', '')}",
               COLUMNS="100")
    u = User(py.parent, home, env)
    yield u
    u.run("daemon", "stop", cwd=home, timeout=60)


@pytest.fixture
def desk(tmp_path) -> Path:
    """The user's own folder (outside the checkout)."""
    d = tmp_path / "desk"
    d.mkdir()
    return d
