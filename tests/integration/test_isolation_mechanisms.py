"""The mechanisms of issue 26 in-process, without a sandboxed child: the seccomp filter that keeps a run's hands
off its worker (confine.py, in a forked process), the worker's self-check, the parent's confinement of
locations (paths.py), the streamed text scan (scan.py) and the guard's exact-object rule (identity.wraps)."""
from __future__ import annotations

import fcntl
import functools
import json
import os
import resource
import signal
import types

import pytest

from harness.isolation import confine
from harness import paths
from harness import scan
from harness.identity import MISSING, inherited, wraps


def _in_fork(fn) -> dict:
    """Run fn() in a forked child; its JSON answer."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            out = fn()
        except BaseException as e:      # noqa: BLE001 - report anything to the test
            out = {"error": repr(e)}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data)


def _attempts(target: int) -> dict:
    out = {}

    def t(name, fn):
        try:
            fn()
            out[name] = "allowed"
        except OSError:
            out[name] = "refused"
    t("prlimit", lambda: resource.prlimit(target, resource.RLIMIT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE)))
    t("nice", lambda: os.setpriority(os.PRIO_PROCESS, target, os.getpriority(os.PRIO_PROCESS, target)))
    t("nice-uid", lambda: os.setpriority(os.PRIO_USER, 0, 19))
    t("affinity", lambda: os.sched_setaffinity(target, os.sched_getaffinity(target)))
    t("policy", lambda: os.sched_setscheduler(target, os.SCHED_OTHER, os.sched_param(0)))
    t("signal", lambda: os.kill(target, 0))
    t("signal-all", lambda: os.kill(-1, 0))
    # named where a filter on pids cannot look: refused whoever they name (see the test below)
    t("pidfd", lambda: signal.pidfd_send_signal(os.open(f"/proc/{target}", os.O_RDONLY | os.O_DIRECTORY), 0))
    t("fd-owner", lambda: fcntl.fcntl(os.pipe()[0], fcntl.F_SETOWN, target))
    return out


@pytest.mark.skipif(confine._NATIVE.get(os.uname().machine) is None, reason="no filter for this architecture")
def test_the_filter_refuses_every_way_to_change_the_parent_and_allows_the_same_on_itself():
    parent = os.getpid()

    def child():
        installed = confine.protect(confine.tids_of(parent))
        return {"installed": installed, "parent": _attempts(parent),
                "self": _attempts(os.getpid())}
    got = _in_fork(child)
    assert got.get("installed") is True, got
    assert set(got["parent"].values()) == {"refused"}, got["parent"]
    routed = {k: got["self"].pop(k) for k in ("nice-uid", "signal-all", "pidfd", "fd-owner")}
    assert set(got["self"].values()) == {"allowed"}, got["self"]
    assert routed["pidfd"] == routed["fd-owner"] == "refused", routed


@pytest.mark.skipif(confine._NATIVE.get(os.uname().machine) is None, reason="no filter for this architecture")
def test_under_the_filter_no_user_namespace_is_made_and_threads_forks_and_commands_still_start():
    """unshare/clone with CLONE_NEWUSER are refused; clone3 (its flags in a struct the filter cannot read) does
    not exist, and glibc's threads, posix_spawn and fork fall back to clone, which the filter reads."""
    import ctypes
    import subprocess
    import threading

    def child():
        ok = confine.protect([os.getppid()])
        libc = ctypes.CDLL(None, use_errno=True)
        out = {"installed": ok, "unshare": libc.unshare(confine.CLONE_NEWUSER), "errno": ctypes.get_errno()}
        libc.syscall.restype = ctypes.c_long
        out["clone3"] = (libc.syscall(435, (ctypes.c_uint64 * 11)(), ctypes.c_size_t(88)), ctypes.get_errno())
        if out["clone3"][0] == 0:
            os._exit(0)
        seen = []
        t = threading.Thread(target=lambda: seen.append(1))
        t.start(), t.join()
        out["thread"] = seen == [1]
        out["spawn"] = subprocess.run(["/bin/sh", "-c", "exit 7"]).returncode
        pid = os.fork()
        if pid == 0:
            os._exit(3)
        out["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        return out
    got = _in_fork(child)
    assert got.get("installed") is True, got
    assert got["unshare"] == -1 and got["errno"] == 1, got          # EPERM
    assert got["clone3"] == [-1, 38], got                              # ENOSYS
    assert got["thread"] and got["spawn"] == 7 and got["fork"] == 3, got


def _scratch_in_fork(scratch, keep: list) -> dict:
    """In a fork: a run's namespaces with `scratch` made fresh (keeping `keep`), then what the run sees and does."""
    def child():
        ok = confine.private_namespaces({str(scratch): (8 << 20, [str(k) for k in keep])})
        if not ok:
            return {"namespaces": False}
        st = os.statvfs(scratch)
        out = {"namespaces": True, "size": st.f_blocks * st.f_frsize, "listing": sorted(os.listdir(scratch))}
        (scratch / "run.txt").write_text("written by the run")
        for k in keep:
            if k.is_dir():
                out.setdefault("kept", {})[k.name] = sorted(os.listdir(k))
                (k / "from-run.txt").write_text("the run's result")
        with open("/proc/self/status") as f:
            out["caps"] = [ln.split()[1] for ln in f if ln.startswith(("CapEff:", "CapPrm:"))]
        return out
    return _in_fork(child)


def test_a_runs_mount_namespace_makes_its_scratch_fresh_and_binds_the_workers_folder_again(tmp_path):
    """confine.private_namespaces with `fresh`, in a forked process: the scratch folder is a new empty tmpfs of
    the given size, so nothing the worker (or a run before) left there is seen and nothing the run writes there
    reaches the worker; the folder kept inside it (the worker's slot, with the run's folder) is the same folder
    again, both ways; no capability is left. A kept folder that cannot be opened leaves the scratch as it was
    (the run must reach its folder)."""
    scratch = tmp_path / "scratch"
    (scratch / "slot").mkdir(parents=True)
    (scratch / "left-by-the-worker.txt").write_text("x")
    (scratch / "slot" / "submission.py").write_text("x")
    def userns():
        import ctypes
        return {"made": ctypes.CDLL(None, use_errno=True).unshare(confine.CLONE_NEWUSER) == 0}
    if not _in_fork(userns)["made"]:
        pytest.skip("this kernel gives no user namespace to this process")
    got = _scratch_in_fork(scratch, [scratch / "slot"])
    assert got.get("namespaces"), got
    assert got["size"] == 8 << 20 and got["listing"] == ["slot"], got
    assert got["kept"] == {"slot": ["submission.py"]}, got
    assert got["caps"] == ["0" * 16, "0" * 16], got
    assert not (scratch / "run.txt").exists()                        # the run's own tmpfs, gone with it
    assert (scratch / "slot" / "from-run.txt").read_text() == "the run's result"
    assert (scratch / "left-by-the-worker.txt").exists()
    got = _scratch_in_fork(scratch, [scratch / "slot", scratch / "missing"])
    assert got["namespaces"] and "left-by-the-worker.txt" in got["listing"], got
    assert (scratch / "run.txt").exists()                            # as before: the worker's folder


def test_without_the_filter_the_same_calls_reach_the_parent():
    """The attack is real: the kernel lets a same-uid child do it (what the filter is for)."""
    parent = os.getpid()
    got = _in_fork(lambda: _attempts(parent))
    assert got["prlimit"] == got["affinity"] == "allowed", got


def test_a_worker_sees_a_change_of_its_own_limits_priority_and_affinity():
    """The second layer: whatever gets through, the worker's comparison with its recorded state finds."""
    def worker():
        base = confine.own_state()
        me = os.getpid()
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

        def poisoner():
            resource.prlimit(me, resource.RLIMIT_NOFILE, (soft - 1, hard))
            nice = os.getpriority(os.PRIO_PROCESS, me)
            os.setpriority(os.PRIO_PROCESS, me, nice + 1 if nice < 19 else nice - 1)   # lower needs root
            cpus = sorted(os.sched_getaffinity(me))
            if len(cpus) > 1:
                os.sched_setaffinity(me, cpus[:1])
            return {}
        _in_fork(poisoner)
        found = confine.changes(base)
        return {"found": found, "clean_before": confine.changes(base, base)}
    got = _in_fork(worker)
    assert got["clean_before"] == []
    text = " ".join(got["found"])
    assert "RLIMIT_NOFILE" in text, got
    assert "nice" in text or "CPU affinity" in text, got


def test_locations_outside_the_submission_are_dropped(tmp_path):
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "adapters.py").write_text("x = 1\n")
    (repo / "model.py").write_text("y = 2\n")
    allowed = paths.submission_files(repo, "students/ann/repo")
    result = {"checks": [{"location": {"file": "students/ann/repo/model.py", "line": 1}},
                         {"location": {"file": "/etc/hostname", "line": 1}},
                         {"location": {"file": "students/ann/repo/../../bob/solution.py", "line": 3}},
                         {"data": {"where": [{"file": "students/ann/repo/tests/adapters.py", "line": 1},
                                             {"file": ["not", "a", "name"], "line": 2}]}}],
              "load": {"location": {"file": "students/ann/repo", "line": 4}}}
    dropped = paths.confine_locations(result, allowed)
    assert result["checks"][0]["location"]["file"] == "students/ann/repo/model.py"
    assert result["checks"][3]["data"]["where"][0]["file"] == "students/ann/repo/tests/adapters.py"
    assert result["checks"][1]["location"]["file"] is None and result["checks"][2]["location"]["file"] is None
    assert result["checks"][3]["data"]["where"][1]["file"] is None
    assert len(dropped) == 3 and "/etc/hostname" in " ".join(dropped)
    one = tmp_path / "submission.py"
    one.write_text("z = 3\n")
    assert paths.submission_files(one, "mymodel.py") == frozenset({"mymodel.py"})


def test_the_scan_reads_a_file_of_any_size(tmp_path):
    body = "import torch\n" + ("# padding " * 20 + "\n") * 120_000 + "import harness.child.main as hc\n" + \
        "x = 1\n" * 10 + "import ctypes\n"
    assert len(body) > 2_000_000
    whats = [f["what"] for f in scan.scan_source(body)]
    assert "imports the grader (harness)" in whats and "imports ctypes" in whats
    p = tmp_path / "big.py"
    p.write_text(body)
    streamed = scan.scan_file(p)
    assert [(f["line"], f["what"]) for f in streamed] == [(120_002, "imports the grader (harness)"),
                                                          (120_013, "imports ctypes")]
    # a token cut by a chunk's end is still found
    chunks = [b"import torch\nx = sys._get", b"frame(1)\n", b""]
    assert scan.scan_stream(iter(chunks)) == [{"line": 2, "what": "frame introspection (sys._getframe)"}]


def test_only_a_wrapper_of_the_recorded_object_counts_as_torchs_own_change():
    def original(x):
        return x

    @functools.wraps(original)
    def wrapper(*a, **k):
        return original(*a, **k)

    def closure_wrapper(*a):
        return original(*a)

    def another(x):                 # defined in the same place, but not the object recorded
        return x
    assert wraps(wrapper, original) and wraps(closure_wrapper, original)
    assert not wraps(another, original) and not wraps(another, MISSING)

    class Base:
        def step(self):
            return 1

    class Child(Base):
        pass
    assert inherited(Child, "step") is Base.__dict__["step"] and inherited(Child, "nothing") is MISSING
    assert isinstance(Base.__dict__["step"], types.FunctionType)


def test_the_graders_modules_are_out_of_sys_modules_while_student_code_runs():
    import sys

    import harness
    import harness.scan as original
    from harness.child.hide import Hidden
    grader = os.path.dirname(harness.__file__) + "/"
    reported = []
    hidden = Hidden(sys.modules, [grader], report=lambda name, line: reported.append(name))
    spec_before = original.__spec__
    # an import written in the grader's own files (a function-level import in harness code)
    grader_import = {}
    exec(compile("import harness.scan as got\n", grader + "somewhere.py", "exec"), grader_import)
    with hidden:
        assert "harness.scan" not in sys.modules and "harness" not in sys.modules
        assert "reference_model.reversal" not in sys.modules or "reference_model.reversal" not in hidden.names
        with pytest.raises(ModuleNotFoundError):
            exec(compile("import harness.scan as got\n", "/scratch/submission.py", "exec"), {})
        exec(compile("import harness.scan as got\n", grader + "somewhere.py", "exec"), grader_import)
        served = grader_import["got"]
    assert served is original                               # the grader gets its own module
    assert reported == ["harness"]                          # anyone else: refused and reported
    assert sys.modules["harness.scan"] is original and sys.modules["harness"] is harness
    assert original.__spec__ is spec_before


def _as_one_user() -> None:
    """Both sides of the next test as one unprivileged user (root reads any process's memory: CAP_SYS_PTRACE)."""
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    import ctypes
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)      # a change of user made the process non-dumpable: undo it


@pytest.mark.parametrize("prober", [False, True], ids=["plain", "prober"])
def test_a_split_runs_prober_is_out_of_reach_of_a_process_of_the_same_user(prober):
    """Without bubblewrap's PID namespace the model server sees the prober: a process of the same user could open
    its memory for writing and its descriptors (its result pipe). The prober makes itself non-dumpable
    (confine.protect_surroundings(prober=True), which harness.child.main calls in a split run): refused."""
    r, w = os.pipe()
    target = os.fork()
    if target == 0:
        os.close(r)
        _as_one_user()
        if prober:
            confine.undumpable()
        os.write(w, b"x")
        signal.pause()
        os._exit(0)
    os.close(w)
    try:
        assert os.read(r, 1) == b"x"

        def reach() -> dict:
            _as_one_user()
            out = {}
            for name, how in (("mem", lambda: open(f"/proc/{target}/mem", "r+b").close()),
                              ("fds", lambda: os.listdir(f"/proc/{target}/fd")),
                              ("fd", lambda: os.close(os.open(f"/proc/{target}/fd/{w}", os.O_WRONLY)))):
                try:
                    how()
                    out[name] = "allowed"
                except OSError as e:
                    out[name] = type(e).__name__
            return out
        got = _in_fork(reach)
        if prober:
            assert got == {"mem": "PermissionError", "fds": "PermissionError", "fd": "PermissionError"}, got
        else:           # the same user reaches a dumpable process (the test would otherwise prove nothing); Yama,
            yama = "/proc/sys/kernel/yama/ptrace_scope"     # where on, refuses memory to a process not an ancestor
            yama_on = os.path.exists(yama) and open(yama).read().strip() != "0"
            assert got["fds"] == "allowed" and (yama_on or got["mem"] == "allowed"), got
    finally:
        os.kill(target, signal.SIGKILL)
        os.waitpid(target, 0)
        os.close(r)


def test_the_mtxdiag_command_makes_itself_non_dumpable():
    """The command a user runs (its click group, before any subcommand) refuses its memory to a run's code of the
    same user where no PID namespace hides it; PR_GET_DUMPABLE read in that process after a subcommand ran."""
    import subprocess
    import sys
    code = ("import ctypes\nfrom harness.cli.main import main\n"
            "main(['assignment', 'list'], standalone_mode=False)\n"
            "print('DUMPABLE', ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "DUMPABLE 0" in out.stdout, (out.stdout[-2000:], out.stderr[-2000:])
