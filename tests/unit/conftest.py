"""The unit tier runs in-process: a test here that starts a process (a sandboxed child, a fresh interpreter,
a fork) fails with where it belongs. That keeps `python -m pytest tests/unit` within its minutes."""
import os
import subprocess

import pytest


def _refuse(*args, **kwargs):
    raise AssertionError("tests/unit is in-process: this test started a process; move it to tests/integration "
                         "(child runs, the sandbox) or tests/quality (corpus and self-test bars)")


@pytest.fixture(autouse=True)
def _in_process_only(monkeypatch):
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse)
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, _refuse)
