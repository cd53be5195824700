"""Usage errors of the CLI exit 2 before any check starts (in-process, click's runner); the CLI end to end: tests/integration/test_check_cli.py."""
from __future__ import annotations

import time
import pytest
from click.testing import CliRunner
from harness.cli.main import main

from test_check_cli import LESSON_PY  # noqa: F401, F811 (fixtures, helpers)


@pytest.mark.parametrize("args", [
    ["check", "{tmp}/no_such_file.py"],
    ["check", "{tmp}/notes.txt"],
    ["check", "{lesson}", "--assignment", "translation"],
    ["check", "{lesson}", "--device", "tpu"],
    ["check"],
])
def test_usage_errors_exit_2(tmp_path, args):
    (tmp_path / "notes.txt").write_text("x = 1\n")
    args = [a.format(tmp=tmp_path, lesson=LESSON_PY) for a in args]
    t = time.monotonic()
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert time.monotonic() - t < 30          # rejected before any child process starts
    assert not list(tmp_path.glob("*.json"))
