"""What a warm worker does around each fork, shared by both warm workers: the prober's (harness/child/zygote.py) and
the model server's (harness/child/modelzygote.py, issue 45). A standalone file, standard library only and no
import of the grader: the model server's worker runs with nothing of the harness on its file system, so this file
is copied beside it (as modelwire.py is beside the model server) and imported as a top-level module there.

* `prepare(private)`: before the worker imports anything heavy: the scratch folders' baseline (what the sandbox
  put in /tmp, /var/tmp, /dev/shm, /dev/mqueue), non-dumpable, dies with its parent, subreaper of everything a run
  starts, the signals a run could send it ignored.
* `serve(control, nfds, fork, base, changes, private, slot, ctl)`: per request on the control socket (a JSON
  message and `nfds` descriptors; the model server's worker also takes one fewer, see `optional`), forks;
  `fork(req, fds, control)` becomes the run and never returns. After the fork exits: every process left below
  the worker killed and reaped, the scratch folders and System V IPC emptied (`clean_up`), the worker's own state
  compared (`changes(base)`): a change is reported with the exit status (`poisoned`) and the worker exits.
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import socket
import time

SCRUB = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue")
_BASELINE: dict = {}   # what the sandbox itself put in SCRUB before any run (binds of sys.path folders, e.g. a
                       # Dask worker's scratch folder under /tmp; the worker's own folder): top -> (paths, mounts)
_WALK_LIMIT = 5000     # entries read under one baseline folder (the sandbox puts a handful there)
IGNORED = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGINT, signal.SIGPIPE)


# -- the process table ------------------------------------------------------------------------------------------
def table() -> dict[int, tuple[int, int, str]]:
    """pid -> (ppid, session, state) for every visible process."""
    out = {}
    try:
        names = os.listdir("/proc")
    except OSError:            # no procfs (not Linux): only the process group kill in the runner applies
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        rest = raw[raw.rfind(b")") + 2:].split()
        try:
            out[int(name)] = (int(rest[1]), int(rest[3]), rest[0].decode())
        except (IndexError, ValueError):
            continue
    return out


def send_signal(pid: int, sig) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_descendants() -> None:
    """Kill everything this process started (it is their subreaper): stopped first, so none can fork any more."""
    me = os.getpid()
    for _ in range(10):
        procs = table()
        children: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in procs.items():
            children.setdefault(ppid, []).append(pid)
        found, stack = set(), list(children.get(me, ()))
        while stack:
            pid = stack.pop()
            if pid not in found:
                found.add(pid)
                stack.extend(children.get(pid, ()))
        found = {p for p in found if procs.get(p, (0, 0, "Z"))[2] != "Z"}
        if not found:
            return
        for p in found:
            send_signal(p, signal.SIGSTOP)
        for p in found:
            send_signal(p, signal.SIGKILL)
        time.sleep(0.01)


def prctl(option: int, arg: int) -> bool:
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0) == 0
    except Exception:
        return False


def place(fds: list[int], targets: tuple) -> None:
    """In a fork: each received descriptor at its target number (in order; fewer descriptors than targets leave the
    last targets alone), the received numbers closed. Moved out of the way first, so that none is overwritten
    before its turn."""
    import fcntl
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, max(targets) + 1) for fd in fds]
    for fd in set(fds):
        if fd not in targets[:len(fds)]:
            os.close(fd)
    for fd, target in zip(high, targets):
        os.dup2(fd, target)
        os.close(fd)


def apply_rlimits(v: dict) -> None:
    """Set rlimits() on the calling process (lowering only), with no core dumps."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if v.get("as"):
        resource.setrlimit(resource.RLIMIT_AS, (v["as"], v["as"]))
    resource.setrlimit(resource.RLIMIT_CPU, (v["cpu"], v["cpu"] + 5))
    resource.setrlimit(resource.RLIMIT_FSIZE, (v["fsize"], v["fsize"]))
    resource.setrlimit(resource.RLIMIT_NOFILE, (v["nofile"], v["nofile"]))
    if v.get("nproc"):
        hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
        n = v["nproc"] if hard == resource.RLIM_INFINITY else min(v["nproc"], hard)
        resource.setrlimit(resource.RLIMIT_NPROC, (n, n))


# -- the scratch folders ----------------------------------------------------------------------------------------
def inventory(top: str) -> tuple[frozenset, frozenset]:
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


def fresh_places(scratch_mb: dict) -> dict:
    """What a run's own mount namespace makes fresh (confine.fresh_scratch): each of the sandbox's capped tmpfs
    ({folder: MB}) with the mounts the sandbox put in it (the worker's folder, binds of sys.path folders)."""
    return {top: (int(mb) << 20, sorted(_BASELINE[top][1])) for top, mb in scratch_mb.items() if top in _BASELINE}


def _slot_path(top: str, name: str, slot: str) -> bool:
    """The worker's own folder (bound from the host, e.g. under /tmp) or a folder on the way to it: never
    scrubbed here (the grading process empties it) and not a leftover."""
    path = os.path.join(top, name)
    return slot == path or slot.startswith(path.rstrip("/") + "/")


def leftovers(top: str, slot: str) -> list[str]:
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


def clean_up(private: bool, slot: str = "") -> list[str]:
    """After a run: nothing of it may reach the next one. The shared folders and IPC objects are emptied only
    when they are the sandbox's own (`private`): without bubblewrap they are the machine's, shared with
    everything else the user runs (and a cold run shares them too). Returns what could not be emptied."""
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
        for path in leftovers(top, slot):
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)
            except OSError:
                pass
    remove_sysv_ipc()
    left = []
    for top in SCRUB:
        names = leftovers(top, slot)
        if names:
            left.append(f"{top} could not be emptied after the run ({', '.join(names[:5])[:200]})")
    return left + writable_binds(slot)


def remove_sysv_ipc() -> None:
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


# -- the worker -------------------------------------------------------------------------------------------------
def prepare(private: bool) -> None:
    """The worker, before its imports: the scratch baseline, then out of its runs' reach."""
    if private:
        for top in SCRUB:
            try:
                _BASELINE[top] = inventory(top)
            except OSError:
                pass
    prctl(4, 0)                       # PR_SET_DUMPABLE 0: no ptrace, no /proc/<pid>/mem or fd of this process
    prctl(1, signal.SIGKILL)          # PR_SET_PDEATHSIG: die with whoever started us
    prctl(36, 1)                      # PR_SET_CHILD_SUBREAPER: orphans of a run come back here
    for sig in IGNORED:
        signal.signal(sig, signal.SIG_IGN)


def serve(control: socket.socket, nfds: int, fork, base: dict, changes, private: bool, slot: str, ctl: tuple,
          optional: int = 0) -> int:
    """The worker's loop (see the module's text). ctl: the answers' keys (protocol.CTL: ready, started, exit,
    poisoned, error, in that order); optional: how many of the `nfds` descriptors a request may leave out (the
    last ones)."""
    ready, started, exited, poisoned, error = ctl
    control.send(json.dumps({ready: os.getpid()}).encode())
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(control, 65536, nfds)
        except OSError:
            return 0
        if not msg:
            return 0
        try:
            req = json.loads(msg)
        except ValueError:
            req = None
        if not isinstance(req, dict) or not nfds - optional <= len(fds) <= nfds:
            for fd in fds:
                os.close(fd)
            control.send(json.dumps({error: f"a request is a JSON object and {nfds} descriptors"}).encode())
            continue
        pid = os.fork()
        if pid == 0:
            for sig in IGNORED:
                signal.signal(sig, signal.SIG_DFL)
            prctl(4, 1)                  # the fork is an ordinary child again (faulthandler, core limit 0)
            fork(req, fds, control)      # never returns
            os._exit(1)
        for fd in fds:
            os.close(fd)
        control.send(json.dumps({started: pid}).encode())
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                break
            except InterruptedError:
                continue
        changed = clean_up(private, slot) + changes(base)
        done = {exited: os.waitstatus_to_exitcode(status)}
        if changed:                   # the run changed this worker: report it against that run, and retire
            control.send(json.dumps(dict(done, **{poisoned: changed[:20]})).encode())
            return 0
        control.send(json.dumps(done).encode())
