"""A warm worker, inside the sandbox: torch imported once, a fresh forked child per submission.

`grade` and `selftest` start one per job slot (warm.py, in the grading process). It runs under the same
sandbox and limits as a cold child (runner.py), in the slot's own folder, and does only this:

* imports what every check imports (torch, torch._dynamo, the probes, numpy and matplotlib when present) and
  runs no tensor operation (a forked OpenMP pool would hang);
* becomes the subreaper of everything below it and non-dumpable (no process of the sandbox can read or
  write its memory or descriptors);
* per request on its control socket (a JSON message and four descriptors: the key pipe, stdout, stderr,
  the result pipe), forks; the fork closes the socket, starts its own session, enters a user, an IPC and a
  mount namespace of its own with no capability in them (confine.private_namespaces), where /tmp, /var/tmp
  and /dev/shm are new empty size-capped tmpfs that die with the run, takes the descriptors as
  0, 1, 2 and 3, sets every limit to the worker's recorded one and then the run's own (address space, CPU
  time, processes, file size, open files), moves into the run's
  folder, draws fresh random seeds and runs `harness.child.main` exactly as a cold child does;
* after the fork exits: kills every process left below it, reaps them, empties its own /tmp, /var/tmp,
  /dev/shm and /dev/mqueue (where a run could not have its own), removes System V IPC objects, compares its
  own limits, nice value, scheduling policy and CPU affinity (every thread's) with those it recorded at
  start (confine.py), and only then reports the exit
  status; a change, or a folder it could not empty, is reported with it (`poisoned`) and the worker exits,
  so the next submission gets a fresh one. The grading process checks that no process of the run is left
  and empties the slot's folder before the next request.

Student code never runs in this process: it runs only in the forks, each of which starts from the state
this process had before the first submission.
"""
from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import socket
import sys

from ..protocol import CTL_ERROR, CTL_EXIT, CTL_POISONED, CTL_READY, CTL_STARTED, FORK_FDS, RESULT_FD

SCRUB = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue")
_BASELINE: dict = {}   # what the sandbox itself put in SCRUB before any run (binds of sys.path folders, e.g. a
                       # Dask worker's scratch folder under /tmp): top -> (tmpfs paths, mount points)
_WALK_LIMIT = 5000     # entries read under one baseline folder (the sandbox puts a handful there)


def _inventory(top: str) -> tuple[frozenset, frozenset]:
    """(paths on top's own tmpfs, mount points) under `top`, never descending into another mount: what the
    sandbox placed there before any run. Paths are absolute."""
    try:
        dev = os.lstat(top).st_dev
    except OSError:
        return frozenset(), frozenset()
    paths, mounts, todo = set(), set(), [top]
    while todo and len(paths) + len(mounts) < _WALK_LIMIT:
        d = todo.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_dev != dev:
                mounts.add(e.path)                   # a bind: its contents are not this tmpfs's
                continue
            paths.add(e.path)
            if e.is_dir(follow_symlinks=False):
                todo.append(e.path)
    return frozenset(paths), frozenset(mounts)


def writable_binds(slot: str = "") -> list[str]:
    """Baseline mounts a run could write into: files there would outlive the run (must be read-only binds).
    The worker's own folder (`slot`, bound writable from the host, emptied by the grading process after every
    run) and the mounts on the way to it or inside it are not."""
    out = []
    for top, (_, mounts) in sorted(_BASELINE.items()):
        for m in sorted(mounts):
            if slot and (slot == m or slot.startswith(m.rstrip("/") + "/") or m.startswith(slot.rstrip("/") + "/")):
                continue
            try:
                if not os.statvfs(m).f_flag & os.ST_RDONLY:
                    out.append(f"{m} is a writable folder the sandbox placed in {top}: files there outlive a run")
            except OSError:
                pass
    return out


def _prctl(option: int, arg: int) -> bool:
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0) == 0
    except Exception:
        return False


def _warm_up() -> None:
    """Import what a check imports, without computing anything."""
    import torch
    torch.set_num_threads(1)
    import torch._dynamo  # noqa: F401  (child.main imports it before recording torch's functions)

    import reference_model.reversal  # noqa: F401  (the calibration step's model)

    from . import audit, calibrate, capture, main as child, side as child_side, lm_loader, loader  # noqa: F401
    from .probes import PROBES  # noqa: F401
    try:
        import matplotlib
        import numpy  # noqa: F401
        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401  (the lessons import it; 0.4 s a submission)
    except Exception:
        pass
    # Out of the garbage collector's sight from now on: a full collection in a fork walks every object and
    # so writes to (copies) every page the fork shares with this worker; one such collection made parsing
    # a student's file take 0.6 s instead of 16 ms. These objects live as long as the worker anyway.
    gc.collect()
    gc.freeze()


def _fresh_places() -> dict:
    """What a run's own mount namespace makes fresh (confine.fresh_scratch): each of the sandbox's capped tmpfs
    with the mounts the sandbox put in it (the worker's folder, binds of sys.path folders), {} without bubblewrap."""
    from ..isolation.sandbox import SCRATCH_MB
    return {top: (mb << 20, sorted(_BASELINE[top][1])) for top, mb in SCRATCH_MB.items() if top in _BASELINE}


def _fork_run(req: dict, fds: list[int], control: socket.socket, base: dict, private: bool = False) -> None:
    """In the fork: become a fresh child for this run, then run harness.child.main. Never returns."""
    code = 1
    try:
        control.close()
        os.setsid()
        if private:                    # in bubblewrap's sandbox: user, IPC and mount namespaces of this run's own,
            from ..isolation.confine import private_namespaces    # its /tmp, /var/tmp and /dev/shm new and empty
            private_namespaces(_fresh_places())
        for target, fd in zip(FORK_FDS, fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > RESULT_FD:
                os.close(fd)
        sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
        sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
        sys.__stdout__, sys.__stderr__ = sys.stdout, sys.stderr
        from ..isolation.confine import restore
        from ..isolation.scratch import apply_rlimits
        restore(base)                  # every limit, nice, policy and affinity: the worker's recorded ones
        apply_rlimits(req["limits"])   # then the run's own, as a cold child gets them (runner._limits)
        os.chdir(req["run"])
        import tempfile
        was = tempfile.gettempdir()       # the worker's (its slot folder): torch's imports derived paths from it
        os.environ.update(req["env"])
        tempfile.tempdir = None           # recomputed from this run's TMPDIR, as in a cold child
        for k, v in list(os.environ.items()):      # e.g. TORCHINDUCTOR_CACHE_DIR, set by importing torch._dynamo
            if k not in req["env"] and v.startswith(was + os.sep):
                os.environ[k] = req["run"] + v[len(was):]
        import random
        random.seed()
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        from . import main as child
        sys.argv = [child.__file__] + list(req["argv"])
        code = child.entry(list(req["argv"]))
    except BaseException:
        try:
            import traceback
            traceback.print_exc()
        except BaseException:
            pass
    os._exit(code)


def _slot_path(top: str, name: str, slot: str) -> bool:
    """The worker's own folder (bound from the host, e.g. under /tmp) or a folder on the way to it: never
    scrubbed here (the grading process empties it) and not a leftover."""
    path = os.path.join(top, name)
    return slot == path or slot.startswith(path.rstrip("/") + "/")


def _leftovers(top: str, slot: str) -> list[str]:
    """What is in `top` now that the sandbox did not put there before any run, outermost first: inside the
    baseline's own folders too (a file written next to a read-only bind is a leftover), never inside a mount
    or the worker's folder."""
    paths, mounts = _BASELINE.get(top, (frozenset(), frozenset()))
    out, todo = [], [top]
    while todo and len(out) < _WALK_LIMIT:
        d = todo.pop()
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for name in names:
            path = os.path.join(d, name)
            if path in mounts:
                continue
            if path in paths:                        # the sandbox's own folder: look inside it
                if os.path.isdir(path) and not os.path.islink(path):
                    todo.append(path)
            elif not (d == top and _slot_path(top, name, slot)):
                out.append(path)
    return out


def _clean_up(private: bool, slot: str = "") -> list[str]:
    """After a run: nothing of it may reach the next one. The shared folders and IPC objects are emptied only
    when they are the sandbox's own (`private`): without bubblewrap they are the machine's, shared with
    everything else the user runs (and a cold run shares them too). Returns what could not be emptied."""
    from ..isolation.sandbox import kill_descendants
    kill_descendants()
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
    if not private:
        return []
    for top in SCRUB:
        for path in _leftovers(top, slot):
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)
            except OSError:
                pass
    _remove_sysv_ipc()
    left = []
    for top in SCRUB:
        names = _leftovers(top, slot)
        if names:
            left.append(f"{top} could not be emptied after the run ({', '.join(names[:5])[:200]})")
    return left + writable_binds(slot)


def _remove_sysv_ipc() -> None:
    """Shared memory, semaphores and message queues a run created (the sandbox's IPC namespace outlives it)."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
    except Exception:
        return
    for kind, call in (("shm", "shmctl"), ("sem", "semctl"), ("msg", "msgctl")):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            parts = row.split()
            if len(parts) > 1:
                ident = int(parts[1])
                if kind == "sem":
                    getattr(libc, call)(ident, 0, 0)         # IPC_RMID (0)
                else:
                    getattr(libc, call)(ident, 0, None)


def serve(control_fd: int, private: bool) -> int:
    control = socket.socket(fileno=control_fd)
    control.set_inheritable(False)
    if private:
        for top in SCRUB:
            try:
                _BASELINE[top] = _inventory(top)
            except OSError:
                pass
    _prctl(4, 0)                      # PR_SET_DUMPABLE 0: no ptrace, no /proc/<pid>/mem or fd of this process
    _prctl(1, signal.SIGKILL)         # PR_SET_PDEATHSIG: die with whoever started us
    _prctl(36, 1)                     # PR_SET_CHILD_SUBREAPER: orphans of a run come back here
    for sig in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGINT, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    _warm_up()
    from ..isolation import confine
    base = confine.own_state()
    slot = os.path.realpath(os.getcwd())   # this worker's folder, bound from the host        # what every run starts from, and what this worker must still be after it
    control.send(json.dumps({CTL_READY: os.getpid()}).encode())
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(control, 65536, len(FORK_FDS))
        except OSError:
            return 0
        if not msg:
            return 0
        req = json.loads(msg)
        if len(fds) != len(FORK_FDS):
            for fd in fds:
                os.close(fd)
            control.send(json.dumps({CTL_ERROR: f"a request needs {len(FORK_FDS)} descriptors"}).encode())
            continue
        pid = os.fork()
        if pid == 0:
            for sig in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGINT, signal.SIGPIPE):
                signal.signal(sig, signal.SIG_DFL)
            _prctl(4, 1)                 # the fork is an ordinary child again (faulthandler, core limit 0)
            _fork_run(req, fds, control, base, private)
        for fd in fds:
            os.close(fd)
        control.send(json.dumps({CTL_STARTED: pid}).encode())
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                break
            except InterruptedError:
                continue
        changed = _clean_up(private, slot) + confine.changes(base)
        done = {CTL_EXIT: os.waitstatus_to_exitcode(status)}
        if changed:                   # the run changed this worker: report it against that run, and retire
            control.send(json.dumps(dict(done, **{CTL_POISONED: changed[:20]})).encode())
            return 0
        control.send(json.dumps(done).encode())


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--control-fd", type=int, required=True)
    ap.add_argument("--private-tmp", action="store_true", help="/tmp, /dev/shm and IPC are the sandbox's own")
    a = ap.parse_args()
    os._exit(serve(a.control_fd, a.private_tmp))
