"""The daemon's cache key (in-process); the daemon itself: tests/integration/test_daemon.py."""
from __future__ import annotations

import os
from harness.isolation import daemon


def test_the_key_changes_with_what_a_result_depends_on(monkeypatch):
    base = daemon.key()
    assert daemon.key() == base
    monkeypatch.setenv("LC_ALL", "C.UTF-8" if os.environ.get("LC_ALL") != "C.UTF-8" else "POSIX")
    assert daemon.key() != base
    monkeypatch.undo()
    monkeypatch.setattr(daemon.sys, "executable", "/nonexistent/python3")
    assert daemon.key() != base
