"""Hostile submissions, second wave (issue 26): what the instructor sees when a submission attacks its warm worker,
the sandbox's writable places, the result through the grader's frames, the guard's record, the grader's modules,
or does through libraries what it may not do itself. Each case asserts the verdict, the integrity finding and
the score; the batch runs them with three correct canaries, two of them after worker-poisoning files in the
same warm worker (`grade --jobs 1`), and every canary must be clean at full marks.

The files are in tests/hostile/wave2_*.py (a header says which base they are appended to).
"""
from __future__ import annotations

import csv
import json
import os
import random
import re
from pathlib import Path

import pytest

import mutants
from harness.grading import rubric as rubric_mod
from harness.isolation import confine, sandbox, warm
from harness.api import check_file
from harness.runner import Limits

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = ROOT / "tests" / "hostile"
REFERENCE = ROOT / "reference_model" / "reversal.py"
MEMORY_MB = 2048
MARK = str(random.randint(100000, 999999))
SECRET = "MTXDIAG-WAVE2-SECRET-" + MARK


def _without_train(text: str) -> str:
    assert "\ndef train(" in text
    return text.replace("\ndef train(", "\ndef lesson_train(")


def build(name: str, folder: Path, **fill) -> Path:
    """The submission of tests/hostile/<name>.py: its base (header `# base:`), then the hostile part."""
    text = (HOSTILE / f"{name}.py").read_text()
    base = re.search(r"^# base:\s*(\S+)", text, re.M).group(1)
    if base == "none":
        head = ""
    elif base == "reference":
        head = _without_train(REFERENCE.read_text()) + "\n\n"
    else:
        head = _without_train(mutants.source(mutants.get(base.split(":", 1)[1]))) + "\n\n"
    for k, v in dict(fill, MARK=MARK).items():
        text = text.replace("{{" + k + "}}", str(v))
    assert "{{" not in text, name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(head + text)
    return path


def line_of(path: Path, code: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if code in ln)


def causes(r) -> list[str]:
    return [d["id"] for d in r["diagnoses"]]


def check_of(r, cid):
    return next((c for c in r["checks"] if c["id"] == cid), None)


def score(r) -> float:
    return rubric_mod.score(r, rubric_mod.load())["score"]


def ops_of(r) -> dict:
    c = check_of(r, "forbidden-ops")
    assert c is not None and c["status"] == "fail", [(x["id"], x["status"]) for x in r["checks"]]
    return {a["op"]: a for a in c["data"]["attempts"]}


def run(path, warm_run=False, cores=2):
    return check_file(path, quick=True, limits=Limits(timeout_s=240, memory_mb=MEMORY_MB, cores=cores,
                                                      warm=warm_run))


def assert_clean_canary(r):
    assert r["verdict"] == "clean" and r["diagnoses"] == [], (causes(r), r.get("error"))
    assert score(r) == 100
    assert not any(c["id"] in ("tamper", "tamper-static", "result-channel", "isolation", "forbidden-ops")
                   for c in r["checks"]), [c["id"] for c in r["checks"]]


@pytest.fixture
def fresh_workers():
    warm.close_all()
    yield
    warm.close_all()


# ---------------------------------------------------------------------------- the warm worker

def test_a_run_cannot_cripple_its_worker_and_the_next_student_is_unharmed(tmp_path, fresh_workers):
    """prlimit/renice/SCHED_IDLE/affinity/signals on the worker are refused (confine.py's filter), the attempt
    is on the poisoner's own record, and the next submission in the very same worker is clean at 100."""
    path = build("wave2_poison_worker", tmp_path / "p")
    r = run(path, warm_run=True)
    shown = re.search(r"^CRIPPLE (.*)$", r["stdout"], re.M).group(1).split()
    assert shown and all(s.endswith("-REFUSED") for s in shown), shown
    attempts = check_of(r, "forbidden-ops")["data"]["attempts"]
    assert ("prlimit", line_of(path, "# OP prlimit load")) in [(a["op"], a["line"]) for a in attempts], attempts
    assert r["verdict"] == "problems" and causes(r) == ["forbidden-operation"], causes(r)
    assert score(r) == 100          # the default rubric: a flag the instructor sees, the model's score stands
    canary = run(REFERENCE, warm_run=True)
    assert canary["timings"].get("torch_import_s", 1) < 0.05, "not the same warm worker"
    assert_clean_canary(canary)


def test_a_run_cannot_signal_its_worker_through_a_descriptor(tmp_path, fresh_workers):
    """Routes that name the worker where a filter on pids cannot look - its /proc folder as a pidfd, a pipe's or a
    socket's I/O signal owner - are refused, the owner attempts are on the run's record with their line, and the
    next submission in the very same worker is clean at 100."""
    path = build("wave3_signal_worker", tmp_path / "s")
    r = run(path, warm_run=True)
    shown = re.search(r"^ROUTED (.*)$", r["stdout"], re.M).group(1).split()
    assert len(shown) >= 3 and all(s.endswith("-REFUSED") for s in shown), shown
    attempts = [(a["op"], a["line"]) for a in check_of(r, "forbidden-ops")["data"]["attempts"]]
    assert ("signal-owner", line_of(path, "# OP signal-owner load")) in attempts, attempts
    assert "forbidden-operation" in causes(r), causes(r)
    canary = run(REFERENCE, warm_run=True)
    assert canary["timings"].get("torch_import_s", 1) < 0.05, "not the same warm worker"
    assert_clean_canary(canary)


@pytest.mark.skipif(os.uname().machine not in ("x86_64", "aarch64"), reason="no filter for this architecture")
def test_no_key_one_run_leaves_in_the_kernels_key_store_reaches_the_next(tmp_path, fresh_workers):
    """The uid's user keyring outlives a run inside its warm worker: a key added there by one run was read by the
    next. The filter refuses the key store's calls; the raw system calls are on the run's record (ctypes)."""
    path = build("wave3_keyring", tmp_path / "k")
    first = run(path, warm_run=True)
    second = run(path, warm_run=True)
    assert second["timings"].get("torch_import_s", 1) < 0.05, "not the same warm worker"
    for r in (first, second):
        assert re.search(r"^ADD refused$", r["stdout"], re.M), r["stdout"][-500:]
        assert re.search(r"^FOUND nothing$", r["stdout"], re.M), r["stdout"][-500:]
        assert "ctypes" in ops_of(r), ops_of(r)


def own_scratch() -> bool:
    """Each run of a warm worker gets namespaces and scratch places of its own: inside bubblewrap, where the
    filter works (sandbox.command lets the worker's runs make their namespaces only then)."""
    return sandbox.mode() == "bwrap" and confine.filter_works()


def worker_namespaces() -> dict[str, set[str]]:
    """The namespace ids of every process of the idle warm workers (bubblewrap's, the sandbox's init, the worker
    itself), read from here: the run cannot read them from inside its own user namespace (the kernel refuses)."""
    out: dict[str, set[str]] = {"user": set(), "ipc": set(), "mnt": set()}
    for w in list(warm._all):
        for pid in w.base:
            for kind in out:
                try:
                    out[kind].add(os.readlink(f"/proc/{pid}/ns/{kind}"))
                except OSError:
                    pass
    return out


@pytest.mark.skipif(os.uname().machine not in ("x86_64", "aarch64"), reason="no filter for this architecture")
def test_each_run_of_a_warm_worker_has_namespaces_and_scratch_of_its_own_and_cannot_make_one(tmp_path,
                                                                                        fresh_workers):
    """Runs of one warm worker shared its user, IPC and mount namespace: what the kernel keeps there (the uid's
    keyrings, System V IPC, POSIX queues) and the files in its /tmp, /var/tmp and /dev/shm passed from one
    student to the next (emptied after each run, but by the worker). Each run now gets all three of its own
    (confine.private_namespaces), its scratch places new size-capped tmpfs with the worker's folder bound
    again, holds no capability in them (it can neither unmount its /tmp nor mount over it), sees the uid a cold
    run sees, and cannot make a user namespace itself (unshare refused, clone3 absent: the filter)."""
    if not own_scratch():
        pytest.skip("a warm worker's runs get namespaces of their own inside bubblewrap, where the filter works")
    path = build("wave3_namespace", tmp_path / "n")
    cold = run(path)
    first, second = run(path, warm_run=True), run(path, warm_run=True)
    assert second["timings"].get("torch_import_s", 1) < 0.05, "not the same warm worker"
    worker = worker_namespaces()
    mine = {k: os.readlink(f"/proc/self/ns/{k}") for k in worker}
    assert all(worker[k] - {mine[k]} for k in worker), ("the worker's namespaces were not read", worker)
    for r in (first, second):      # not the worker's (two runs' ids may be equal: a freed id is reused)
        ns = dict(zip(worker, re.search(r"^NS (\S+) (\S+) (\S+)$", r["stdout"], re.M).groups()))
        assert all(ns[k] not in worker[k] for k in worker), (ns, worker)
        mounts = re.search(r"^MOUNTS (.*)$", r["stdout"], re.M).group(1).split()
        for top in ("/tmp", "/var/tmp", "/dev/shm"):
            assert mounts.count(f"{top}=tmpfs") == 2, (top, mounts)       # the worker's, and the run's over it
            size, held = re.search(rf"^SCRATCH {top} (\d+) (\S+)$", r["stdout"], re.M).groups()
            assert int(size) == sandbox.SCRATCH_MB[top] << 20, (top, size)
            assert "left-by-a-run" not in held, (top, held)               # the run before wrote it to /tmp
        assert re.search(r"^WROTE /tmp$", r["stdout"], re.M), r["stdout"][-500:]
        assert re.search(r"^UMOUNT Operation not permitted$", r["stdout"], re.M), r["stdout"][-500:]
        assert re.search(r"^MOUNT Operation not permitted$", r["stdout"], re.M), r["stdout"][-500:]
    uid = re.search(r"^UID .*$", cold["stdout"], re.M).group(0)
    for r in (cold, first, second):
        assert re.search(r"^UNSHARE Operation not permitted$", r["stdout"], re.M), r["stdout"][-500:]
        assert re.search(r"^CLONE3 Function not implemented$", r["stdout"], re.M), r["stdout"][-500:]
        assert re.search(r"^UID .*$", r["stdout"], re.M).group(0) == uid
        assert "ctypes" in ops_of(r), ops_of(r)
    for r in (first, second):
        assert re.search(r"^CAPS 0+ 0+ 0+$", r["stdout"], re.M), r["stdout"][-500:]


def test_folders_a_run_cannot_empty_in_scratch_places_never_reach_the_next_student(tmp_path, fresh_workers):
    """Folders nobody may enter (mode 0) planted in every writable place. Where each run has scratch places of
    its own (own_scratch) they were the run's own tmpfs, gone with it: the worker is unchanged and kept, the
    run keeps its 100 with its writes on its record (nothing of anyone else was touched). Elsewhere the worker's emptying fails, so it
    retires and the run that did it carries the finding. Either way the next student sees nothing of them."""
    r = run(build("wave2_stuck_scratch", tmp_path / "s"), warm_run=True)
    planted = re.search(r"^PLANT (.*)$", r["stdout"], re.M).group(1).split()
    for top in ("/", "/etc", "/opt", "/root", "/var", "/dev", "/usr"):
        if sandbox.mode() == "bwrap":                # read-only root: nothing outside the scratch places
            assert f"{top}:REFUSED" in planted, planted
    nxt = run(build("wave2_find_planted", tmp_path / "f"), warm_run=True)
    if own_scratch():
        assert all(f"{top}:PLANTED" in planted for top in ("/tmp", "/var/tmp", "/dev/shm")), planted
        assert "tampering" not in causes(r) and check_of(r, "isolation") is None, (causes(r), check_of(r, "isolation"))
        assert score(r) == 100          # its writes outside its folder are on its record (forbidden-operation)
        assert "mkdir" in ops_of(r), ops_of(r)
        assert nxt["timings"].get("torch_import_s", 1) < 0.05, "the worker was retired: the run reached it"
    elif sandbox.mode() == "bwrap":
        assert "tampering" in causes(r), causes(r)
        iso = check_of(r, "isolation")
        assert iso["status"] == "fail" and "could not be emptied" in iso["detail"], iso
        assert score(r) == 0
    assert re.search(r"^FOUND-PLANTED nothing$", nxt["stdout"], re.M), nxt["stdout"][-500:]


def test_scratch_memory_and_the_root_are_capped_and_read_only(tmp_path):
    if sandbox.mode() != "bwrap":
        pytest.skip("the sandbox's own /dev/shm and /tmp need bubblewrap")
    r = run(build("wave2_fill_memory", tmp_path / "m"))
    m = re.search(r"^FILLED shm (\d+) tmp (\d+)$", r["stdout"], re.M)
    assert m, r["stdout"][-500:]
    assert int(m.group(1)) <= sandbox.SCRATCH_MB["/dev/shm"] and int(m.group(2)) <= sandbox.SCRATCH_MB["/tmp"]


@pytest.mark.parametrize("warm_run", [False, True], ids=["cold", "warm"])
def test_a_run_folder_filled_past_its_cap_ends_the_run_and_the_next_student_is_unharmed(tmp_path, warm_run,
                                                                                       fresh_workers):
    """Files each under the per-file cap, 576 MB in all: the parent's disk watch (diskwatch.py) ends the run
    past limits.RUN_FOLDER_MB, says so, and the next student in the same worker is clean at 100."""
    import time
    from harness.limits import RUN_FOLDER_MB
    t = time.monotonic()
    r = run(build("wave2_fill_disk", tmp_path / "d"), warm_run=warm_run)
    assert r["verdict"] == "error" and causes(r) == ["crashed"], (causes(r), r.get("error"))
    assert "into its run folder" in r["error"]["reason"] and f"limit of {RUN_FOLDER_MB} MB" in r["error"]["reason"]
    assert time.monotonic() - t < 45          # ended by the watch, not by the file's own 60 s wait or the timeout
    assert_clean_canary(run(REFERENCE, warm_run=warm_run))


# ---------------------------------------------------------------------------- the verdict

@pytest.mark.parametrize("name,how", [("wave2_frame_forge", "_getframe"), ("wave2_tb_walk", "tb_frame")])
def test_walking_to_the_grader_s_frames_is_reported_however_the_result_was_rewritten(tmp_path, name, how):
    """The walk forges the result (every check passes, the integrity records gone, a host file as location):
    the parent was told of the introspection as it happened, so the forgery is tampering at 0, and no
    location names a file outside the submission."""
    r = run(build(name, tmp_path / name), cores=1)
    assert "tampering" in causes(r), causes(r)
    iso = check_of(r, "isolation")
    assert iso is not None and iso["status"] == "fail" and how in iso["detail"], iso
    assert score(r) == 0
    files = re.findall(r'"file": "([^"]*)"', json.dumps(r))
    assert not any(f.startswith("/etc") for f in files), files


def test_another_torch_function_in_place_of_a_relied_on_one_is_tampering(tmp_path):
    r = run(build("wave2_torch_swap", tmp_path / "t"), cores=1)
    assert "tampering" in causes(r), causes(r)
    assert "torch.isfinite" in " ".join(check_of(r, "tamper")["data"]["changed"])
    assert not any("torch.isfinite" in a for a in check_of(r, "tamper")["data"]["accepted"])
    assert score(r) == 0


def test_delegating_the_contract_to_the_reference_through_sys_modules_is_tampering(tmp_path):
    r = run(build("wave2_delegate", tmp_path / "d"), cores=1)
    assert r["verdict"] != "clean" and "tampering" in causes(r), causes(r)
    assert "reference_model.reversal" in check_of(r, "tamper")["detail"]
    assert score(r) == 0


def test_a_padded_file_is_still_scanned(tmp_path):
    pad = ("# " + "x" * 98 + "\n") * 21_000                # 2.1 million characters before the import
    path = build("wave2_padded_import", tmp_path / "pad", PAD=pad)
    assert path.stat().st_size > 2_000_000
    r = run(path, cores=1)
    c = check_of(r, "tamper-static")
    assert c is not None and "imports the grader" in c["detail"], c
    assert f"line {line_of(path, '# OP import load')}" in c["detail"]
    assert "tampering" in causes(r) and score(r) == 0


# ---------------------------------------------------------------------------- through libraries

def test_what_a_library_does_for_the_student_is_reported(tmp_path):
    path = build("wave2_library_ops", tmp_path / "l")
    r = run(path, cores=1)
    ops = ops_of(r)
    assert ops["read"]["target"].endswith("reference_model/reversal.py"), ops["read"]
    assert ops["read"]["via"] == "a library called by your code"
    assert ops["read"]["line"] == line_of(path, "# OP read load")
    assert ops["subprocess"]["line"] == line_of(path, "# OP subprocess load")
    assert ops["ctypes"]["line"] == line_of(path, "# OP ctypes load")
    assert "forbidden-operation" in causes(r)


# ---------------------------------------------------------------------------- a batch

POISONERS = ["wave2_poison_worker", "wave3_signal_worker"]
FORGERS = ["wave2_frame_forge", "wave2_tb_walk", "wave2_torch_swap", "wave2_delegate", "wave2_library_ops"]


@pytest.mark.slow
def test_a_batch_of_hostile_submissions_leaves_every_canary_clean(tmp_path, monkeypatch, fresh_workers):
    """grade --jobs 1 (one warm worker for all, in name order): a poisoner, canary, a poisoner, canary, the
    forgeries, canary. Every canary is clean at full marks; every hostile row carries its finding; no secret
    of the grading shell's environment or the rubric reaches any output."""
    grade = pytest.importorskip("harness.grading.grade")
    monkeypatch.setenv("MTXDIAG_WAVE2_SECRET", SECRET)
    src, out = tmp_path / "submissions", tmp_path / "grades"
    order = [POISONERS[0], "canary", POISONERS[1], "canary"] + FORGERS + ["canary"]
    names = []
    for i, name in enumerate(order):
        student = f"{i:02d}_{name}"
        if name == "canary":
            (src / student).mkdir(parents=True)
            (src / student / "model.py").write_text(REFERENCE.read_text())
        else:
            build(name, src / student)
        names.append(student)
    summary = grade.grade_folder(src, out, options=grade.Options(quick=True, timeout_s=120, memory_mb=MEMORY_MB,
                                                                  jobs=1, warm=True), progress=False)
    assert summary.total == len(order) and not summary.grader_faults and not summary.interrupted
    res = {p.parent.name: json.loads(p.read_text()) for p in (out / "students").glob("*/result.json")}
    canaries = [n for n in names if n.endswith("canary")]
    assert len(canaries) == 3
    for n in canaries:
        assert res[n]["verdict"] == "clean" and res[n]["diagnoses"] == [], (n, causes(res[n]), res[n].get("error"))
        assert res[n]["grade"]["score"] == res[n]["grade"]["max_score"], (n, res[n]["grade"])
    with open(out / "grades.csv") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    for n in names:
        if n.endswith("canary"):
            assert rows[n]["integrity"] == "", (n, rows[n]["integrity"])
            continue
        assert rows[n]["integrity"], (n, "no integrity finding")
        if not n.endswith(("wave2_poison_worker", "wave3_signal_worker", "wave2_library_ops")):
            assert res[n]["grade"]["score"] == 0, (n, res[n]["grade"])
    for p in out.rglob("*"):
        if p.is_file() and p.suffix in (".json", ".html", ".csv", ".log"):
            text = p.read_text(errors="replace")
            assert SECRET not in text and "MTXDIAG_WAVE2_SECRET" not in text, p
    assert os.environ.get("MTXDIAG_WAVE2_SECRET") == SECRET
