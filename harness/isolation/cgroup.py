"""A cgroup (v2) per run, where the machine delegates one to us: memory, processes and CPU enforced by the kernel.

RLIMIT_AS bounds one process's address space; it does not count memory a run holds as files (memfd, tmpfs,
/dev/shm: 42 memfds of 60 MB were held under a 2 GB limit), nor add up a run's processes, nor share the CPU
between two runs (busy processes in their own sessions starved the other job slot). A cgroup does all three:
`memory.max` charges every page the run's processes make, shared memory and tmpfs included, and the kernel
ends the run at it (`memory.oom.group`: all of it); `pids.max` bounds its tasks; `cpu.weight` gives each run
the same share of the machine however many processes it starts, and `cpu.max` caps it at its cores.

`detect()` finds out once per process whether that is possible here: cgroup v2 mounted, the memory, pids and
cpu controllers available to our cgroup (on a hybrid machine cgroup v1 holds them), and a subtree we may write
(root, or a delegated one: `systemd-run --user -p Delegate=yes`, or the folder named by MTXDIAG_CGROUP). Where
it is not, runs fall back to rlimits and the parent's measurements (memwatch.py, held.py, diskwatch.py), and the
result says which is active (`limits.enforced_by`). MTXDIAG_LIMITS=rlimits turns the cgroups off.

`RunGroup`: one run's cgroup, made before the run starts (a cold child joins it before exec; a warm worker's
fork is moved into it, with anything it started, as soon as it exists), emptied with `cgroup.kill` (or SIGKILL
to each member) and removed after the run.
"""
from __future__ import annotations

import errno
import os
import secrets
import signal
import threading
import time
from dataclasses import dataclass

NEEDED = ("memory", "pids", "cpu")
CPU_PERIOD_US = 100_000
_OPEN = os.O_WRONLY       # the kernel makes a cgroup's files; tests standing in for it add O_CREAT
_lock = threading.Lock()
_cache: dict = {}


@dataclass(frozen=True)
class Detection:
    """How this machine limits a run: `enforced_by` is "cgroup-v2" (runs under `parent`) or "rlimits" (`why`)."""
    enforced_by: str
    parent: str = ""
    why: str = ""


def detect() -> Detection:
    """Whether each run can get a cgroup of its own here (tested once per process, cached)."""
    with _lock:
        if "detection" not in _cache:
            _cache["detection"] = _detect_here()
        return _cache["detection"]


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _detect_here() -> Detection:
    choice = os.environ.get("MTXDIAG_LIMITS", "auto").strip().lower()
    if choice == "rlimits":
        return Detection("rlimits", why="MTXDIAG_LIMITS=rlimits")
    return detect_from(_read("/proc/self/mountinfo"), _read("/proc/self/cgroup"),
                       os.environ.get("MTXDIAG_CGROUP", "").strip() or None)


def cgroup2_mount(mountinfo: str) -> tuple[str, str] | None:
    """(mount point, root inside the hierarchy) of the first cgroup2 mount in /proc/self/mountinfo's text."""
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        if sep and right.split(" ", 1)[0] == "cgroup2":
            f = left.split()
            if len(f) >= 5:
                return f[4].replace("\\040", " "), f[3]
    return None


def own_cgroup(proc_cgroup: str) -> str | None:
    """Our path in the v2 hierarchy: the `0::/path` line of /proc/self/cgroup."""
    for line in proc_cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:].strip() or "/"
    return None


def detect_from(mountinfo: str, proc_cgroup: str, wanted: str | None = None) -> Detection:
    """The decision from the texts of /proc/self/mountinfo and /proc/self/cgroup; `wanted`: a delegated folder
    named by the instructor (MTXDIAG_CGROUP) instead of our own cgroup."""
    mount = cgroup2_mount(mountinfo)
    if mount is None:
        return Detection("rlimits", why="cgroup v2 is not mounted here")
    point, root = mount
    if wanted:
        parent = wanted
    else:
        mine = own_cgroup(proc_cgroup)
        if mine is None:
            return Detection("rlimits", why=f"cgroup v2 is mounted at {point} but this process is not in it")
        rel = mine[len(root):] if root != "/" and mine.startswith(root) else mine
        parent = os.path.join(point, rel.lstrip("/")).rstrip("/") or point
    have = _read(os.path.join(parent, "cgroup.controllers")).split()
    missing = [c for c in NEEDED if c not in have]
    if missing:
        held = " (a hybrid machine: cgroup v1 holds them)" if _v1_holds(mountinfo, missing) else ""
        return Detection("rlimits", why=f"cgroup v2 is mounted at {point}, but the {', '.join(missing)} "
                                        f"controller(s) are not available in {parent}{held}")
    if not os.access(parent, os.W_OK) or not os.access(os.path.join(parent, "cgroup.subtree_control"), os.W_OK):
        return Detection("rlimits", why=f"{parent} is not delegated to this user (not writable)")
    why = _enable(parent, wanted is None)
    if why:
        return Detection("rlimits", why=why)
    why = _try_child(parent)
    return Detection("rlimits", why=why) if why else Detection("cgroup-v2", parent=parent)


def _v1_holds(mountinfo: str, names: list[str]) -> bool:
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        if sep and right.split(" ", 1)[0] == "cgroup":
            opts = right.split()[-1].split(",") if right.split() else []
            if any(n in opts for n in names):
                return True
    return False


def _enable(parent: str, ours: bool) -> str:
    """The controllers switched on for the runs' cgroups under `parent`; '' when done, else why not. A cgroup
    that holds processes cannot hand controllers down (v2's rule): when it is our own and we are alone in it,
    we move into a leaf of our own first, as a delegated scope's owner does."""
    ctl = os.path.join(parent, "cgroup.subtree_control")
    if all(c in _read(ctl).split() for c in NEEDED):
        return ""
    try:
        _write(ctl, " ".join("+" + c for c in NEEDED))
        return ""
    except OSError as e:
        if e.errno != errno.EBUSY or not ours:
            return f"cannot enable {', '.join(NEEDED)} for runs under {parent}: {e.strerror}"
    procs = _read(os.path.join(parent, "cgroup.procs")).split()
    if procs != [str(os.getpid())]:
        return (f"our cgroup {parent} holds other processes, so it cannot hand its controllers to runs (name a "
                f"delegated cgroup with MTXDIAG_CGROUP)")
    try:
        leaf = os.path.join(parent, "mtxdiag-grader")
        os.makedirs(leaf, exist_ok=True)
        _write(os.path.join(leaf, "cgroup.procs"), str(os.getpid()))
        _write(ctl, " ".join("+" + c for c in NEEDED))
        return ""
    except OSError as e:
        return f"cannot enable {', '.join(NEEDED)} for runs under {parent}: {e.strerror}"


def _try_child(parent: str) -> str:
    probe = os.path.join(parent, f"mtxdiag-probe-{os.getpid()}-{secrets.token_hex(3)}")
    try:
        os.mkdir(probe)
    except OSError as e:
        return f"cannot make a cgroup under {parent}: {e.strerror}"
    try:
        if not os.path.exists(os.path.join(probe, "memory.max")):
            return f"a cgroup made under {parent} has no memory.max"
        return ""
    finally:
        try:
            os.rmdir(probe)
        except OSError:
            pass


def _write(path: str, text: str) -> None:
    fd = os.open(path, _OPEN | (os.O_TRUNC if _OPEN & os.O_CREAT else 0), 0o644)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


class RunGroup:
    """One run's cgroup: made with its limits, joined by the run's processes, killed and removed after it."""

    def __init__(self, parent: str, memory_mb: int, pids: int, cores: int):
        self.path = os.path.join(parent, f"mtxdiag-run-{os.getpid()}-{secrets.token_hex(4)}")
        os.mkdir(self.path)
        self.memory_mb, self.pids, self.cores = memory_mb, pids, max(1, cores)
        settings = [("memory.oom.group", "1"), ("cpu.weight", "100"),
                    ("cpu.max", f"{self.cores * CPU_PERIOD_US} {CPU_PERIOD_US}")]
        if memory_mb:
            settings += [("memory.max", str(memory_mb << 20)), ("memory.swap.max", "0")]
        if pids:
            settings.append(("pids.max", str(pids)))
        try:
            for name, value in settings:
                if name == "memory.swap.max" and not os.path.exists(os.path.join(self.path, name)):
                    continue                    # no swap accounting on this kernel: nothing to cap
                _write(os.path.join(self.path, name), value)
        except OSError:
            self.remove()
            raise

    def procs_file(self) -> str:
        """What a process writes "0" to (a cold child, before exec) to join the run's cgroup."""
        return os.path.join(self.path, "cgroup.procs")

    def adopt(self, pids) -> int:
        """Move these processes into the run's cgroup (a warm fork and what it started); how many moved."""
        n = 0
        for pid in pids:
            try:
                _write(self.procs_file(), str(pid))
                n += 1
            except OSError:
                pass                             # gone already, or a zombie
        return n

    def members(self) -> set[int]:
        return {int(p) for p in _read(self.procs_file()).split() if p.isdigit()}

    def oom_kills(self) -> int:
        """How many times the kernel killed in this cgroup for memory (memory.events)."""
        for line in _read(os.path.join(self.path, "memory.events")).splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0

    def peak_mb(self) -> float:
        raw = _read(os.path.join(self.path, "memory.peak")).strip() or \
            _read(os.path.join(self.path, "memory.current")).strip()
        return int(raw) / 2 ** 20 if raw.isdigit() else 0.0

    def kill(self) -> None:
        """Every process in the cgroup killed: cgroup.kill where the kernel has it (5.14), else SIGKILL each."""
        kill_file = os.path.join(self.path, "cgroup.kill")
        for _ in range(50):
            left = self.members()
            if not left:
                return
            try:
                _write(kill_file, "1")
            except OSError:
                for pid in left:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
            time.sleep(0.02)

    def remove(self) -> None:
        """Kill what is left and remove the cgroup (an empty cgroup can be removed once its tasks are reaped)."""
        self.kill()
        for _ in range(100):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)


def joiner(path: str | None):
    """For a cold child's preexec_fn: join the run's cgroup (write "0" to its cgroup.procs) before exec."""
    def join():
        if path:
            _write(path, "0")
    return join


def forget() -> None:
    """Drop the cached detection (tests)."""
    with _lock:
        _cache.clear()

