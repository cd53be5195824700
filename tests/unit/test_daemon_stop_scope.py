"""`mtxdiag daemon stop` stops only the daemon this install would use; `--all` stops every one of the user's.

Two stand-in daemons (Unix sockets that answer as daemon_server does) share one runtime folder: one under this
install's key(), one under another install's. No child process, no torch."""
from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.isolation import daemon
from harness.cli.main import main


class FakeDaemon(threading.Thread):
    def __init__(self, path: Path):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(4)
        self.ops = []

    def run(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                op = json.loads(conn.makefile().readline())["op"]
                self.ops.append(op)
                conn.sendall((json.dumps({"stopping": op == "stop", "pid": 1}) + "\n").encode())


@pytest.fixture
def two(monkeypatch):
    d = Path(tempfile.mkdtemp(prefix="mtxd-"))
    os.chmod(d, 0o700)
    monkeypatch.setenv("MTXDIAG_RUNTIME_DIR", str(d))
    mine, other = FakeDaemon(d / f"{daemon.key()}.sock"), FakeDaemon(d / f"{'0' * 16}.sock")
    for f in (mine, other):
        f.start()
    yield mine, other
    for f in (mine, other):
        f.sock.close()


def test_stop_reaches_only_this_installs_daemon(two):
    mine, other = two
    res = CliRunner().invoke(main, ["daemon", "stop"])
    assert res.exit_code == 0 and "stopped 1 check daemon(s)" in res.output, res.output
    assert mine.ops == ["stop"] and other.ops == []


def test_stop_all_reaches_every_daemon(two):
    mine, other = two
    res = CliRunner().invoke(main, ["daemon", "stop", "--all"])
    assert "stopped 2 check daemon(s)" in res.output, res.output
    assert mine.ops == ["stop"] and other.ops == ["stop"]


def test_stop_with_only_others_running_says_so(two):
    mine, other = two
    os.unlink(mine.sock.getsockname())      # this install's is gone; another install's still answers
    res = CliRunner().invoke(main, ["daemon", "status"])
    assert res.output.count("daemon ") == 1 and "another install's" in res.output, res.output
    res = CliRunner().invoke(main, ["daemon", "stop"])
    assert res.exit_code == 0, res.output
    assert "no check daemon of this install is running; 1 other of yours is" in res.output
    assert "mtxdiag daemon stop --all" in res.output and "stopped" not in res.output
    assert other.ops == ["status", "status"]            # asked, never stopped
    res = CliRunner().invoke(main, ["daemon", "stop", "--all"])
    assert "stopped 1 check daemon(s)" in res.output and other.ops[-1] == "stop"


def test_status_marks_this_installs_daemon(two):
    res = CliRunner().invoke(main, ["daemon", "status"])
    assert f"daemon {daemon.key()} (this install's)" in res.output
    assert f"daemon {'0' * 16} (another install's)" in res.output


def test_a_repairs_client_that_closes_its_end_is_seen_gone():
    from harness.cli.daemon import _client_gone
    ours, theirs = socket.socketpair()
    try:
        gone = _client_gone(ours)
        assert not gone.wait(0.2)             # still there: it waits for the answer
        theirs.close()                        # Ctrl-C: the client process ends
        assert gone.wait(5)
    finally:
        ours.close()
