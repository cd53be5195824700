"""The cgroup v2 detector and a run's cgroup (harness/isolation/cgroup.py, enforce.py), on the texts of /proc and on
folders that stand in for the cgroup file system: no process is started and no real cgroup is made here."""
from __future__ import annotations

import os

import pytest

from harness.isolation import cgroup, enforce
from harness.protocol import Limits

HYBRID = """\
30 25 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
32 30 0:28 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
33 30 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
41 30 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""


def _unified(point) -> str:
    return f"41 30 0:38 / {point} rw,relatime - cgroup2 cgroup2 rw,nsdelegate\n"


@pytest.fixture(autouse=True)
def _plain_files(monkeypatch):
    monkeypatch.setattr(cgroup, "_OPEN", os.O_WRONLY | os.O_CREAT)   # folders stand in for the cgroup file system


def _tree(root, controllers="cpuset cpu io memory pids", subtree=""):
    root.mkdir(parents=True, exist_ok=True)
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (root / "cgroup.subtree_control").write_text(subtree + "\n")
    (root / "cgroup.procs").write_text("")
    return root


def test_parsing_the_mount_and_our_own_cgroup():
    assert cgroup.cgroup2_mount(HYBRID) == ("/sys/fs/cgroup/unified", "/")
    assert cgroup.cgroup2_mount(HYBRID.replace("cgroup2 cgroup2", "tmpfs tmpfs")) is None
    assert cgroup.own_cgroup("4:memory:/x\n0::/user.slice/run-1.scope\n") == "/user.slice/run-1.scope"
    assert cgroup.own_cgroup("4:memory:/x\n") is None


def test_no_cgroup2_mount_falls_back_to_rlimits_and_says_why():
    d = cgroup.detect_from(HYBRID.replace("cgroup2 cgroup2", "tmpfs tmpfs"), "0::/\n")
    assert d.enforced_by == "rlimits" and "not mounted" in d.why


def test_a_hybrid_machine_whose_controllers_v1_holds_falls_back(tmp_path):
    _tree(tmp_path, controllers="hugetlb")
    d = cgroup.detect_from(HYBRID.replace("/sys/fs/cgroup/unified", str(tmp_path)), "0::/\n")
    assert d.enforced_by == "rlimits", d
    assert "memory, pids, cpu" in d.why and "cgroup v1 holds them" in d.why, d.why


def test_a_delegated_subtree_is_used_and_its_controllers_handed_down(tmp_path, monkeypatch):
    _tree(tmp_path / "user.slice" / "me.scope", subtree="")
    monkeypatch.setattr(cgroup, "_try_child", lambda parent: "")     # a plain folder has no interface files
    d = cgroup.detect_from(_unified(tmp_path), "0::/user.slice/me.scope\n")
    assert d == cgroup.Detection("cgroup-v2", parent=str(tmp_path / "user.slice" / "me.scope")), d
    written = (tmp_path / "user.slice" / "me.scope" / "cgroup.subtree_control").read_text()
    assert written == "+memory +pids +cpu", written


def test_a_folder_that_makes_no_interface_files_is_not_a_cgroup(tmp_path):
    _tree(tmp_path, subtree="cpu memory pids")
    d = cgroup.detect_from(_unified(tmp_path), "0::/\n")
    assert d.enforced_by == "rlimits" and "has no memory.max" in d.why, d
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == []        # the probe cgroup was removed


def test_the_instructor_names_the_delegated_cgroup(tmp_path, monkeypatch):
    _tree(tmp_path / "deleg", subtree="memory pids cpu")
    monkeypatch.setattr(cgroup, "_try_child", lambda parent: "")
    d = cgroup.detect_from(_unified("/sys/fs/cgroup"), "0::/elsewhere\n", wanted=str(tmp_path / "deleg"))
    assert d.enforced_by == "cgroup-v2" and d.parent == str(tmp_path / "deleg")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_a_subtree_not_writable_is_not_delegated(tmp_path):
    _tree(tmp_path, subtree="cpu memory pids")
    os.chmod(tmp_path, 0o555)
    try:
        d = cgroup.detect_from(_unified(tmp_path), "0::/\n")
    finally:
        os.chmod(tmp_path, 0o755)
    assert d.enforced_by == "rlimits" and "not writable" in d.why


def test_turned_off_by_the_environment(monkeypatch):
    monkeypatch.setenv("MTXDIAG_LIMITS", "rlimits")
    cgroup.forget()
    try:
        assert cgroup.detect() == cgroup.Detection("rlimits", why="MTXDIAG_LIMITS=rlimits")
    finally:
        cgroup.forget()


def test_a_run_group_gets_its_limits_and_reads_the_kernel_s_kills(tmp_path):
    g = cgroup.RunGroup(str(tmp_path), memory_mb=2048, pids=256, cores=2)
    files = {p.name: p.read_text() for p in tmp_path.glob("mtxdiag-run-*/*")}
    assert files["memory.max"] == str(2048 << 20) and files["pids.max"] == "256", files
    assert files["cpu.max"] == "200000 100000" and files["cpu.weight"] == "100", files
    assert files["memory.oom.group"] == "1" and "memory.swap.max" not in files, files
    assert g.oom_kills() == 0 and g.members() == set()
    (tmp_path / os.path.basename(g.path) / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n")
    (tmp_path / os.path.basename(g.path) / "cgroup.procs").write_text("4242\n4243\n")
    assert g.oom_kills() == 2 and g.members() == {4242, 4243}


def _as_cgroup(monkeypatch, parent):
    monkeypatch.setattr(cgroup, "detect", lambda: cgroup.Detection("cgroup-v2", parent=str(parent)))


def test_with_a_cgroup_the_kernel_charges_memory_and_an_oom_end_is_memory(tmp_path, monkeypatch):
    _as_cgroup(monkeypatch, tmp_path)
    lim = Limits(memory_mb=1024, processes=100, cores=2)
    guard = enforce.RunLimits(lim)
    assert guard.info() == {"enforced_by": "cgroup-v2", "memory_mb": 1024, "disk_mb": enforce.RUN_FOLDER_MB,
                            "measured_outside": True, "pids": 100, "cpus": 2}
    assert guard.join_path() == os.path.join(guard.group.path, "cgroup.procs")
    watch = guard.watch(lambda: set(), tmp_path)
    assert [w.kind for w in watch.watches] == ["adopt", "disk"]       # no memory watchdog: the kernel counts it
    assert guard.settle(True, watch) is True
    (tmp_path / os.path.basename(guard.group.path) / "memory.events").write_text("oom_kill 1\n")
    assert guard.settle(True, watch) == "memory"
    assert "memory limit of 1024 MB" in watch.fired.reason() and "cgroup" in watch.fired.reason()
    assert guard.settle(False, watch) is False                        # a timeout stays a timeout


def test_without_a_cgroup_rlimits_and_the_outside_measurements(monkeypatch, tmp_path):
    monkeypatch.setattr(cgroup, "detect", lambda: cgroup.Detection("rlimits", why="not here"))
    guard = enforce.RunLimits(Limits(memory_mb=1024))
    assert guard.info() == {"enforced_by": "rlimits", "memory_mb": 1024, "disk_mb": enforce.RUN_FOLDER_MB,
                            "measured_outside": True, "why": "not here"}
    assert guard.join_path() is None
    watch = guard.watch(lambda: set(), tmp_path)
    assert [w.kind for w in watch.watches] == ["memory", "disk"]
    assert not watch.watches[0].resident            # the CPU: private memory and files, not mapped libraries
    guard.close()


def test_processes_of_the_run_outside_its_cgroup_are_moved_in_once_per_sample(tmp_path, monkeypatch):
    """A warm fork and what it started before it was moved: each new reading of the run's processes moves the
    ones not in the cgroup yet (written to its cgroup.procs), and a look between two readings writes nothing."""
    _as_cgroup(monkeypatch, tmp_path)
    guard = enforce.RunLimits(Limits(memory_mb=512))
    procs = tmp_path / os.path.basename(guard.group.path) / "cgroup.procs"
    procs.write_text("")
    run = {os.getpid()}
    watch = guard.watch(lambda: run, tmp_path)
    adopt = watch.watches[0]
    adopt.sampler.period_s = 3600
    assert watch.over() is None and procs.read_text() == str(os.getpid())
    procs.write_text("")
    assert watch.over() is None and procs.read_text() == ""          # no new reading: nothing written
