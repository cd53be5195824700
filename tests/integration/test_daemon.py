"""The per-user check daemon (harness/isolation/daemon.py, harness/cli/daemon.py): the same result as a cold check,
a first check that runs cold and starts it, and a daemon that never outstays, leaks or decides anything.

Each test gets its own runtime folder (MTXDIAG_RUNTIME_DIR) and stops its daemons at the end; the rest of
the suite runs with the daemon off (tests/conftest.py).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import mutants
from harness.isolation import daemon
from harness.api import check_file
from harness.cli.main import main
from harness.runner import Limits
from mutants.export import export_submissions
from mutants.lm_export import mutant_repo_files

from compare_results import comparable as _comparable

ROOT = Path(__file__).resolve().parents[2]
LESSON = ROOT / "submissions" / "reversal_lesson.py"
QUICK = dict(quick=True, limits=Limits(timeout_s=240, cores=2))


@pytest.fixture
def rt(monkeypatch):
    """A private runtime folder (short: a socket's path has at most 107 bytes), the daemon on."""
    d = Path(tempfile.mkdtemp(prefix="mtxd-"))
    os.chmod(d, 0o700)
    monkeypatch.setenv("MTXDIAG_RUNTIME_DIR", str(d))
    monkeypatch.setenv("MTXDIAG_DAEMON", "1")
    yield d
    daemon.ask("stop")
    _gone(d)
    shutil.rmtree(d, ignore_errors=True)      # a daemon that started meanwhile loses its socket: it exits
    end = time.monotonic() + 20
    while _daemons(d) and time.monotonic() < end:
        time.sleep(0.1)
    assert not _daemons(d), "a daemon outlived its test"


def _daemons(d: Path) -> list[int]:
    """The daemons serving folder `d`, by their command lines."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"harness.cli.daemon" in argv and str(d).encode() in argv and _alive(int(name)):
                out.append(int(name))
    return out


def _gone(d: Path, within: float = 20.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not list(d.glob("*.sock")):
            return True
        time.sleep(0.1)
    return False


def _ready(within: float = 120.0) -> dict:
    """The daemon's status once it has a warm worker waiting."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        found = daemon.ask("status")
        if found and found[0].get("idle_workers"):
            return found[0]
        time.sleep(0.2)
    raise AssertionError(f"no daemon with a warm worker after {within} s: {daemon.ask('status')}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:                                  # a zombie is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_check_through_the_daemon_is_the_same_as_a_cold_one(rt, tmp_path, monkeypatch):
    plan = export_submissions(tmp_path / "m", mutants.MUTANTS[:2])
    m = next(x for x in mutants.LM_MUTANTS)
    repo = tmp_path / "lm"
    for rel, text in mutant_repo_files(m).items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    monkeypatch.chdir(tmp_path)                          # relative paths: the result shows them as given
    daemon.start()
    _ready()
    for path in [LESSON] + [Path("m") / name for name, _ in plan] + [Path("lm")]:
        cold = check_file(path, daemon=False, **QUICK)
        said = []
        hot = check_file(path, daemon=True, say=said.append, **QUICK)
        assert said == []
        assert hot["timings"].get("torch_import_s", 1) < 0.05, "not a warm fork: it imported torch"
        assert cold["timings"].get("torch_import_s", 0) > 0.05
        assert hot["submission"] == cold["submission"] == str(path)
        assert _comparable(hot) == _comparable(cold), path


def test_the_first_check_runs_cold_and_starts_the_daemon_for_the_next(rt, tmp_path):
    def check():
        out = tmp_path / f"r{time.monotonic_ns()}.json"
        res = CliRunner().invoke(main, ["check", str(LESSON), "--quick", "--json", str(out), "--html",
                                        str(tmp_path / "r.html")])
        assert res.exit_code == 0, res.output
        return json.loads(out.read_text())

    first = check()
    assert first["timings"]["torch_import_s"] > 0.05       # no daemon was running: a cold child
    status = _ready()
    assert status["checks"] == 0
    second = check()
    assert second["timings"]["torch_import_s"] < 0.05
    assert _comparable(first) == _comparable(second)
    assert daemon.ask("status")[0]["checks"] == 1
    res = CliRunner().invoke(main, ["daemon", "status"])
    assert res.exit_code == 0 and "1 checks" in res.output, res.output
    pid = status["pid"]
    res = CliRunner().invoke(main, ["daemon", "stop"])
    assert "stopped 1 check daemon(s)" in res.output, res.output
    assert _gone(rt)
    end = time.monotonic() + 20
    while _alive(pid) and time.monotonic() < end:
        time.sleep(0.1)
    assert not _alive(pid)
    third = check()                                       # none running again: cold, and it starts one
    assert third["timings"]["torch_import_s"] > 0.05
    assert CliRunner().invoke(main, ["check", str(LESSON), "--quick", "--no-daemon", "--json",
                                     str(tmp_path / "n.json"), "--html", str(tmp_path / "n.html")]).exit_code == 0
    assert json.loads((tmp_path / "n.json").read_text())["timings"]["torch_import_s"] > 0.05


def test_a_folder_others_can_enter_is_never_used(rt, tmp_path):
    os.chmod(rt, 0o755)
    said = []
    r = check_file(LESSON, daemon=True, say=said.append, **QUICK)
    assert r["verdict"] == "clean" and r["timings"]["torch_import_s"] > 0.05
    assert said and "not private" in said[0]
    assert not list(rt.iterdir()), "nothing may be started or written in a folder others can enter"
    assert daemon.start() is False


def test_turned_off_it_is_neither_used_nor_started(rt, monkeypatch):
    monkeypatch.setenv("MTXDIAG_DAEMON", "0")
    said = []
    r = check_file(LESSON, daemon=True, say=said.append, **QUICK)
    assert r["timings"]["torch_import_s"] > 0.05 and said == []
    time.sleep(1.0)
    assert not list(rt.glob("*.sock"))


def test_a_check_the_user_gives_up_on_is_killed_and_the_next_is_warm(rt, tmp_path):
    stuck = tmp_path / "stuck.py"
    stuck.write_text(LESSON.read_text() + "\n\nclass Stuck:\n    import time\n    time.sleep(120)\n")
    daemon.start()
    _ready()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(next(rt.glob("*.sock"))))
    req = {"op": "check", "path": str(stuck), "display": "stuck.py", "assignment": "auto", "seed": 0,
           "quick": True, "limits": dict(Limits(timeout_s=200).__dict__), "isolate": "auto"}
    conn.sendall((json.dumps(req) + "\n").encode())
    conn.settimeout(60)
    seen = b""
    while b'"load"' not in seen:                          # the child is inside the student's class body
        data = conn.recv(4096)
        assert data, seen
        seen += data
    assert daemon.ask("status")[0]["running"] == 1
    conn.close()                                          # Ctrl-C
    end = time.monotonic() + 20
    while daemon.ask("status")[0]["running"] and time.monotonic() < end:
        time.sleep(0.1)
    assert daemon.ask("status")[0]["running"] == 0, "the abandoned check still runs"
    _ready()                                              # a fresh worker replaced the killed one
    r = check_file(LESSON, daemon=True, **QUICK)
    assert r["verdict"] == "clean" and r["timings"]["torch_import_s"] < 0.05


def test_a_daemon_that_dies_mid_check_leaves_a_cold_check(rt, tmp_path):
    daemon.start()
    pid = _ready()["pid"]
    box, said = {}, []
    t = threading.Thread(target=lambda: box.update(r=check_file(LESSON, daemon=True, say=said.append, **QUICK)))
    t.start()
    end = time.monotonic() + 60
    while time.monotonic() < end and not daemon.ask("status")[0].get("running"):
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    t.join(300)
    r = box["r"]
    assert r["verdict"] == "clean" and r["timings"]["torch_import_s"] > 0.05     # run again, cold
    assert said and "checking without it" in said[0], said


def test_it_exits_when_idle_and_two_starts_make_one_daemon(rt, monkeypatch):
    monkeypatch.setenv("MTXDIAG_DAEMON_IDLE_S", "3")
    for _ in range(3):
        assert daemon.start()
    time.sleep(2.0)
    status = _ready()
    assert len(daemon.ask("status")) == 1
    assert status["idle_exit_s"] == 3
    assert _gone(rt, within=30), "an idle daemon outstayed its time"
    end = time.monotonic() + 20
    while _alive(status["pid"]) and time.monotonic() < end:
        time.sleep(0.1)
    assert not _alive(status["pid"])


def test_a_request_it_does_not_know_gets_an_answer_and_changes_nothing(rt):
    daemon.start()
    _ready()
    sock = str(next(rt.glob("*.sock")))
    for raw in (b"not json\n", b'{"op": "rm -rf"}\n', b'{"op": "check", "limits": {"nope": 1}}\n',
                b'{"op": "repair", "spec": {"path": "x"}, "result": {"checks": 3}}\n', b'{"op": "repair"}\n'):
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(20)
        conn.connect(sock)
        conn.sendall(raw)
        reply = b""
        while True:
            data = conn.recv(4096)
            if not data:
                break
            reply += data
        conn.close()
        assert b'"error"' in reply, reply
    assert daemon.ask("status")[0]["checks"] == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_another_user_cannot_reach_it(rt):
    daemon.start()
    _ready()
    sock = str(next(rt.glob("*.sock")))
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            os.setgid(65534)
            os.setuid(65534)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            try:
                s.connect(sock)
                s.sendall(b'{"op": "status"}\n')
                code = 1 if s.recv(4096) else 0
            except OSError:
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "another user got an answer"


def _repairs(r: dict) -> list:
    return [(d["id"], d["confidence"], json.dumps(d.get("repair"), sort_keys=True), d["evidence"])
            for d in r["diagnoses"]]


def test_repairs_made_by_the_daemon_are_the_ones_made_here(rt, tmp_path):
    """daemon.repair (what `check --repair` asks of a running daemon): the same verified repair, confidence and
    evidence as repair_check in this process, coverage dropped as it drops it; with no daemon nothing changes."""
    import copy
    from dataclasses import replace as _replace
    from harness.protocol import CheckSpec
    from harness.repair.run import repair_check
    m = mutants.get("reversal-softmax-wrong-dim")
    f = tmp_path / "m.py"
    f.write_text(mutants.source(m))
    lim = Limits(timeout_s=240, cores=2)
    checked = check_file(f, quick=True, limits=_replace(lim, coverage=True))
    assert checked.get("coverage") and checked["diagnoses"]
    spec = CheckSpec(str(f), assignment="reversal", quick=True, limits=lim)
    untouched = copy.deepcopy(checked)
    assert not daemon.repair(untouched, spec) and untouched == checked       # none running: make them here
    daemon.start()
    _ready()
    there, here = copy.deepcopy(checked), copy.deepcopy(checked)
    said = []
    assert daemon.repair(there, spec, say=said.append)
    repair_check(here, f, limits=lim)
    assert "coverage" not in there and there["timings"]["repair_s"] > 0
    assert there["diagnoses"][0]["repair"]["verified"]
    assert _repairs(there) == _repairs(here)
    assert daemon.ask("status")[0]["checks"] == 1         # the repairs, counted once; its re-checks ran there
