"""Warm workers (harness/isolation/warm.py, harness/child/zygote.py): the same result as a cold child, and nothing of one
student's run reaches the next.

Every comparison runs the same file cold (a new sandboxed interpreter) and in a warm worker that already ran
other submissions, and asserts the whole result is identical except the timings. The isolation tests run
two submissions in one worker: the first leaves files, processes, shared memory and changed modules behind,
the second reports what it can see.
"""
from __future__ import annotations

import concurrent.futures as cf
import os
import random
import re
from pathlib import Path

import pytest

import mutants
from harness.isolation import sandbox, warm
from harness.api import check_file
from harness.runner import Limits
from mutants.export import export_submissions
from mutants.lm_export import mutant_repo_files

from compare_results import comparable

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "reference_model" / "reversal.py"
MARK = str(random.randint(100000, 999999))


_exactly = _comparable = comparable


def _both(path, **kw):
    cold = check_file(path, quick=True, limits=Limits(timeout_s=240), **kw)
    hot = check_file(path, quick=True, limits=Limits(timeout_s=240, warm=True), **kw)
    return cold, hot


@pytest.fixture(autouse=True)
def _retire_workers():
    yield
    warm.close_all()


def test_the_lesson_and_two_mutants_identical_warm_and_cold(tmp_path):
    plan = export_submissions(tmp_path / "m", mutants.MUTANTS[:2])
    files = [REFERENCE] + [tmp_path / "m" / name for name, _ in plan]
    for path in files:
        cold, hot = _both(path)
        assert hot["timings"].get("torch_import_s", 1) < 0.05, "the warm run imported torch again"
        assert _comparable(hot) == _comparable(cold), path.name


@pytest.mark.slow
@pytest.mark.sweep
def test_every_mutant_identical_warm_and_cold(tmp_path):
    """Every lesson mutant and a few lm repositories: cold and warm side by side, one worker reused."""
    plan = export_submissions(tmp_path / "m", mutants.MUTANTS)
    paths = [tmp_path / "m" / name for name, _ in plan]
    for m in mutants.LM_MUTANTS[:: max(1, len(mutants.LM_MUTANTS) // 4)]:
        repo = tmp_path / "lm" / m.id
        for rel, text in mutant_repo_files(m).items():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_text(text)
        paths.append(repo)
    with cf.ThreadPoolExecutor(2) as pool:
        cold = list(pool.map(lambda p: check_file(p, quick=True, limits=Limits(timeout_s=300)), paths))
    differ = []
    for p, c in zip(paths, cold):          # one warm worker for all of them, in turn
        h = check_file(p, quick=True, limits=Limits(timeout_s=300, warm=True))
        if _comparable(h) != _comparable(c):
            differ.append(p.name)
    assert differ == [], f"warm and cold results differ for {differ}"
    assert len(paths) >= len(mutants.MUTANTS) + 3


# --------------------------------------------------------------------------- isolation between students

LEAVE = '''

class _Leave:
    import ctypes, os, subprocess, sys, torch
    for _d in ("/tmp", "/var/tmp", "/dev/shm", os.environ["HOME"]):
        try:
            with open(os.path.join(_d, "left-{MARK}"), "w") as _f:
                _f.write("from the first student")
        except OSError:
            pass
    subprocess.Popen(["sleep", "{MARK}1"], start_new_session=True)
    if os.fork() == 0:
        if os.fork() == 0:
            os.setsid()
            os.execvp("sleep", ["sleep", "{MARK}2"])
        os._exit(0)
    _libc = ctypes.CDLL(None)
    _libc.shmget({MARK}, 4096, 0o1600)          # a System V segment (IPC_CREAT | 0600)
    os.environ["LEFT_{MARK}"] = "1"
    torch.add = lambda *a, **k: None             # in its own process only
    sys.modules["left_{MARK}"] = sys
    import time
    time.sleep(0.3)
'''

LOOK = '''

class _Look:
    import os, sys, torch
    _seen = {}
    for _d in ("/tmp", "/var/tmp", "/dev/shm", os.environ["HOME"], "."):
        try:
            _seen[_d] = [n for n in os.listdir(_d) if "{MARK}" in n]
        except OSError as _e:
            _seen[_d] = []
    _procs = []
    for _p in os.listdir("/proc"):
        if _p.isdigit():
            try:
                with open(f"/proc/{_p}/cmdline", "rb") as _f:
                    if b"{MARK}" in _f.read():
                        _procs.append(_p)
            except OSError:
                pass
    with open("/proc/sysvipc/shm") as _f:
        _shm = [ln for ln in _f.read().splitlines()[1:] if ln.split() and ln.split()[0] == "{MARK}"]
    print("SEEN", _seen, "PROCS", _procs, "SHM", _shm, "ENV", "LEFT_{MARK}" in os.environ,
          "MOD", "left_{MARK}" in sys.modules, "ADD", torch.add(torch.ones(1), 1).tolist())
'''


def _fragment(tmp_path, name, text):
    path = tmp_path / f"{name}.py"
    path.write_text(REFERENCE.read_text() + text.replace("{MARK}", MARK))
    return path


def test_nothing_of_one_run_reaches_the_next(tmp_path):
    if sandbox.mode() != "bwrap":       # without it /tmp, /dev/shm and IPC are the machine's: never emptied
        why = f"bubblewrap is not used here ({sandbox.unavailable_reason() or 'MTXDIAG_ISOLATE=none'})"
        if os.environ.get("MTXDIAG_REQUIRE_BWRAP") == "1":
            pytest.fail(why)
        pytest.skip(why)
    leave = _fragment(tmp_path, "leave", LEAVE)
    look = _fragment(tmp_path, "look", LOOK)
    lim = Limits(timeout_s=120, warm=True)
    check_file(leave, quick=True, limits=lim)
    assert sum(len(v) for v in warm._idle.values()) == 1, "the worker was retired after a run that left things"
    w = next(iter(warm._idle.values()))[0]
    r = check_file(look, quick=True, limits=lim)
    assert w.runs == 2, "the second run did not go to the same worker"
    line = next(ln for ln in r["stdout"].splitlines() if ln.startswith("SEEN"))
    assert re.search(r"SEEN \{'/tmp': \[\], '/var/tmp': \[\], '/dev/shm': \[\], '[^']+': \[\], '\.': \[\]\}",
                     line), line
    assert "PROCS [] SHM [] ENV False MOD False ADD [2.0]" in line, line
    assert not [p for p in _pids_with(MARK)], "a process of the first run is still alive"


def _pids_with(mark: str):
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if mark.encode() in (p / "cmdline").read_bytes() and b"pytest" not in (p / "cmdline").read_bytes():
                    yield int(p.name)
            except OSError:
                pass


LOOP = '''

class MiniTransformer(MiniTransformer):
    def forward(self, src, tgt):
        while True:
            pass
'''

KILL_WORKER = '''

class _Kill:
    import os, signal
    os.kill(os.getppid(), signal.SIGKILL)
'''


def test_a_run_out_of_time_retires_the_worker_and_the_next_gets_a_fresh_one(tmp_path):
    loop = _fragment(tmp_path, "loop", LOOP)
    r = check_file(loop, quick=True, limits=Limits(timeout_s=12, warm=True))
    assert r["error"]["kind"] == "timeout", r["error"]
    stuck = (REFERENCE.read_text() + LOOP).splitlines().index("        while True:") + 1
    assert r["diagnoses"][0]["location"]["line"] in (stuck, stuck + 1), r["diagnoses"][0]  # from the fork's stack
    assert not any(warm._idle.values()), "a worker that timed out was kept"
    again = check_file(REFERENCE, quick=True, limits=Limits(timeout_s=120, warm=True))
    assert again["verdict"] == "clean"


def test_a_submission_cannot_kill_its_worker(tmp_path):
    """Signals to the worker are refused (confine.py): the attempt is reported, the worker serves the next."""
    kill = _fragment(tmp_path, "kill", KILL_WORKER)
    r = check_file(kill, quick=True, limits=Limits(timeout_s=60, warm=True))
    attempts = next(c for c in r["checks"] if c["id"] == "forbidden-ops")["data"]["attempts"]
    assert [a["op"] for a in attempts] == ["os.kill"], attempts
    assert "forbidden-operation" in [d["id"] for d in r["diagnoses"]], r["diagnoses"]     # its class body raised
    assert sum(len(v) for v in warm._idle.values()) == 1, "the worker did not survive"
    again = check_file(REFERENCE, quick=True, limits=Limits(timeout_s=120, warm=True))
    assert again["verdict"] == "clean" and again["timings"].get("torch_import_s", 1) < 0.05


HOSTILE = ("forged_channel", "forged_fds", "channel_closed", "monkeypatch_torch", "exit_forward_os", "orphans",
           "memory_forward", "introspect")


@pytest.mark.slow
def test_hostile_files_end_the_same_in_a_warm_worker(tmp_path):
    """The hostile cases that attack the channel, the process or torch: the same result warm and cold, and
    the worker survives what only ends the student's own run."""
    from test_hostile import MEMORY_MB, build
    env = {"MARK": MARK, "SECRET": tmp_path / "secret", "RUBRIC": tmp_path / "rubric", "REPO": ROOT,
           "OUT": tmp_path / "out", "OTHER": tmp_path / "other", "PORT": 9, "ROOT": ROOT}
    differ = []
    for name in HOSTILE:
        path = build(name, env, tmp_path / "cases")
        lim = dict(timeout_s=120, memory_mb=MEMORY_MB)
        cold = check_file(path, quick=True, limits=Limits(**lim))
        hot = check_file(path, quick=True, limits=Limits(**lim, warm=True))
        if name == "introspect":     # prints its folder, pid and descriptors: those differ by design
            limits = [[ln for ln in r["stdout"].splitlines() if ln.startswith("LIMITS ")] for r in (hot, cold)]
            same = [(d["id"], d["confidence"]) for d in hot["diagnoses"]] == \
                [(d["id"], d["confidence"]) for d in cold["diagnoses"]] and limits[0] == limits[1] != []
        else:
            same = _comparable(hot) == _comparable(cold)
        if not same:
            differ.append(name)
    assert differ == []
    assert not list(_pids_with(MARK))


def test_without_the_sandbox_the_machines_temporary_folders_are_left_alone(tmp_path):
    """Without bubblewrap /tmp and /dev/shm are the machine's: a worker never empties them."""
    import tempfile
    fd, keep = tempfile.mkstemp(prefix="mtxdiag-test-keep-", dir="/tmp")
    os.close(fd)
    try:
        for _ in range(2):          # cleaning happens after a run, before the next
            r = check_file(REFERENCE, quick=True, limits=Limits(timeout_s=120, warm=True), isolate="none")
            assert r["verdict"] == "clean"
        assert os.path.exists(keep) and tmp_path.exists()
        assert sum(w.runs for ws in warm._idle.values() for w in ws) == 2      # both ran in the worker
    finally:
        os.unlink(keep)


def test_a_check_is_the_same_in_every_run_cold_or_warm(tmp_path):
    """torch seeds its generator at random per process and a warm worker's forks inherit one state: the child
    seeds every generator before loading and before each probe, so what a student's code draws without a
    generator of its own (here: nn.init.trunc_normal_'s resampling, which decides how many ops lm's
    first-divergence recorder sees) is the same in two cold runs and a warm one, index of the divergence too."""
    m = next(m for m in mutants.LM_MUTANTS if m.id == "lm-sdpa-mask-inverted")
    repo = tmp_path / "repo"
    for rel, text in mutant_repo_files(m).items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    runs = [check_file(repo, quick=True, limits=Limits(timeout_s=240, warm=w)) for w in (False, False, True)]
    divs = [[(c["id"], c["data"]["divergence"]) for c in r["checks"] if (c.get("data") or {}).get("divergence")]
            for r in runs]
    assert divs[0] and all(isinstance(d["index"], int) for _, d in divs[0])
    assert divs[1] == divs[0] and divs[2] == divs[0]
    for r in runs[1:]:
        assert _exactly(r) == _exactly(runs[0])
