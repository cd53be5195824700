"""Warm workers, the grading process's side: one sandboxed zygote per job slot, a fresh fork per submission.

A cold run (runner.py) starts a sandbox and an interpreter and imports torch for every submission: about
2 s of a 4 s quick check. A warm worker (zygote.py) pays that once per job slot; each submission still gets
a fresh process (forked from the worker's state before any submission ran), its own limits, session and
folder, and the keyed result channel. Between two submissions the worker kills and reaps every process
the run left, empties the sandbox's temporary folders and IPC objects, and this side checks that the worker
is back to exactly its own processes and empties the slot's folder; anything else retires the worker (it
is killed with its sandbox; the next submission gets a fresh one). A run that times out, or a worker that
dies or answers out of turn, also retires it.

Used by `grade`, `selftest`, `watch` and the check daemon (daemon_server.py) (Limits.warm) on the CPU; CUDA
runs are cold.
"""
from __future__ import annotations

import atexit
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ..readable import cut
from . import confine, held, sandbox, scratch
from ..protocol import CTL_EXIT, CTL_POISONED, CTL_READY, CTL_STARTED, RESULT_FD, wire_argv

START_TIMEOUT_S = 120.0
_lock = threading.RLock()
_idle: dict[tuple, list["Worker"]] = {}
_all: set["Worker"] = set()


class WarmError(Exception):
    """The worker could not take the run (it was retired); the caller runs it cold."""


class Stopped(Exception):
    """close_all() retired the worker while it started or ran: the batch is stopping, run nothing more."""


def acquire(isolation: str, threads: int, beside=None) -> "Worker | None":
    """An idle worker for these settings, or a new one; None when none can start here. beside(worker): called
    before a new worker starts, may return what to call once it has (warm_split.beside: the slot's model-server
    worker, started at the same time)."""
    key = (isolation, threads)
    with _lock:
        pool = _idle.setdefault(key, [])
        found = pool.pop() if pool else None
    while found is not None:
        if found.alive():
            return found
        found.retire()
        with _lock:
            found = pool.pop() if pool else None
    w = Worker(isolation, threads)
    try:
        after = beside(w) if beside is not None else None
        w.start()
        if after is not None:
            after()
    except WarmError:
        w.retire()
        if w.stopped:
            raise Stopped from None
        return None
    return w


def release(worker: "Worker") -> None:
    if not worker.alive():
        worker.retire()
        return
    with _lock:
        _idle.setdefault((worker.isolation, worker.threads), []).append(worker)


def idle_count(isolation: str, threads: int) -> int:
    """How many started workers for these settings wait for a submission."""
    with _lock:
        return sum(1 for w in _idle.get((isolation, threads), []) if w.alive())


def close_all() -> None:
    """Retire every worker (end of a grading run; also at exit)."""
    with _lock:
        workers = list(_all)
        _idle.clear()
    for w in workers:
        w.stopped = True
        w.retire()


atexit.register(close_all)


class Worker:
    def __init__(self, isolation: str, threads: int):
        self.isolation, self.threads = isolation, threads
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.slot = Path(tempfile.mkdtemp(prefix="mtxdiag-warm-"))
        self.token = secrets.token_hex(12)
        self.base: set[int] = set()        # the worker's own processes (bwrap, its init, the zygote)
        self.runs = 0
        self.stopped = False               # retired by close_all(): the batch is stopping
        self.server: Worker | None = None  # the slot's model-server worker (warm_split.py), from its first split run
        with _lock:
            _all.add(self)

    # -- life --------------------------------------------------------------------------------------
    def start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            theirs.set_inheritable(True)
            fd = theirs.fileno()
            private = ["--private-tmp"] if self.isolation == "bwrap" else []   # else the machine's own /tmp
            cmd = sandbox.command([sys.executable, "-m", "harness.child.zygote", "--control-fd", str(fd)] + private,
                                  work=self.slot, isolate=self.isolation, pass_fd=fd,
                                  run_namespaces=confine.filter_works())
            if self.isolation == "bwrap":      # its IPC namespace outlives a run: POSIX queues must be visible
                cmd[cmd.index("--dev") + 2:cmd.index("--dev") + 2] = ["--mqueue", "/dev/mqueue"]
            self.proc = subprocess.Popen(cmd, cwd=self.slot, env=scratch.env(self.threads, self.slot, self.isolation,
                                                                      self.token),
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, pass_fds=(fd,), preexec_fn=_zygote_limits,
                                         close_fds=True)
        except OSError as e:
            ours.close()
            raise WarmError(f"could not start a warm worker: {e}") from None
        finally:
            theirs.close()
        self.sock = ours
        msg = self._recv(time.monotonic() + START_TIMEOUT_S)
        if not msg or CTL_READY not in msg:
            raise WarmError(f"the warm worker did not start: {msg}")
        self.base = sandbox.members(self.proc.pid, self.token, self.proc.pid)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and self.sock is not None

    def abort(self) -> None:
        """Kill the worker and its run from another thread (the run's own thread then sees it die and
        retires it); the check daemon does this when the user gave up on a check (Ctrl-C)."""
        self._kill(self.proc)

    def _kill(self, proc) -> None:
        if proc is not None:
            sandbox.kill_tree(proc.pid, self.token, proc.pid)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass

    def retire(self) -> None:
        """Kill the worker with everything in its sandbox and remove its folder."""
        proc, self.proc = self.proc, None
        server, self.server = self.server, None
        if server is not None:
            server.retire()
        if proc is not None:
            self._kill(proc)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.slot.exists():
            scratch.rmtree(self.slot)
        with _lock:
            _all.discard(self)

    # -- runs --------------------------------------------------------------------------------------
    def new_run_dir(self) -> Path:
        d = self.slot / f"run-{secrets.token_hex(6)}"
        d.mkdir()
        return d

    def launch(self, argv: list[str], run_dir: Path, fds: list[int], limits: dict) -> "Run":
        """Ask the zygote for a fork running harness.child.main with `argv`; fds: key, stdout, stderr, result (and
        a split run's prober: its end of the model server's socket)."""
        req = {"argv": argv, "run": str(run_dir), "limits": limits,
               "env": {"HOME": str(run_dir), "TMPDIR": str(run_dir)}}
        try:
            socket.send_fds(self.sock, [json.dumps(req).encode()], fds)
        except (OSError, AttributeError) as e:
            self.retire()
            raise WarmError(f"the warm worker did not take the run: {e}") from None
        msg = self._recv(time.monotonic() + 30)
        if not msg or not isinstance(msg.get(CTL_STARTED), int):
            self.retire()
            raise WarmError(f"the warm worker did not start the run: {msg}")
        self.runs += 1
        return Run(self, msg[CTL_STARTED], run_dir)

    def after_run(self, clean_exit: bool) -> None:
        """Between two submissions: back to its own processes and an empty folder, or retired."""
        if not clean_exit or not self.alive():
            self.retire()
            return
        left = sandbox.members(self.proc.pid, self.token, self.proc.pid) - self.base
        if left:
            self.retire()
            return
        for entry in list(self.slot.iterdir()):
            if entry.is_dir() and not entry.is_symlink():
                scratch.rmtree(entry)
            else:
                entry.unlink(missing_ok=True)
        if any(self.slot.iterdir()):
            self.retire()

    def _recv(self, deadline: float) -> dict | None:
        """The zygote's next message, or None: it died, was silent until the deadline, or sent garbage."""
        while self.sock is not None:
            left = deadline - time.monotonic()
            if left <= 0 or (self.proc is not None and self.proc.poll() is not None):
                return None
            self.sock.settimeout(min(left, 0.05))
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return None
            if not data:
                return None
            try:
                msg = json.loads(data)
            except ValueError:
                return None
            return msg if isinstance(msg, dict) else None
        return None


class Run:
    """One submission in a warm worker, with the interface runner.py uses for a cold child."""

    def __init__(self, worker: Worker, nspid: int, run_dir: Path):
        self.worker, self.nspid, self.run_dir = worker, nspid, run_dir
        self.returncode: int | None = None
        self.done = False
        self.poisoned: list[str] = []      # what the run changed in its worker (the worker then retired)

    def wait(self, deadline: float, watch=None) -> bool | str:
        """True once the zygote reported the fork's exit (after cleaning up); False when out of time; the
        watch's kind ("disk") when it saw the run over its limit (sampled between slices of the wait)."""
        while True:
            end = min(deadline, time.monotonic() + 0.5) if watch is not None else deadline
            msg = self.worker._recv(end)
            if msg is not None or time.monotonic() >= deadline or time.monotonic() < end - 0.01:
                break                     # a message, out of time, or the worker went away before the slice ended
            if watch.over() is not None:
                return watch.kind
        if msg is not None and isinstance(msg.get(CTL_EXIT), int):
            self.returncode, self.done = msg[CTL_EXIT], True
            bad = msg.get(CTL_POISONED)
            if bad:
                self.poisoned = [cut(x, 300) for x in bad[:20]] if isinstance(bad, list) else ["(unreadable)"]
            return True
        if time.monotonic() >= deadline:
            return False
        proc = self.worker.proc        # the worker died (or spoke out of turn): the run ended with it
        rc = proc.poll() if proc is not None else None
        self.returncode = rc if rc is not None and rc < 0 else -signal.SIGKILL
        return True

    def members(self) -> set[int]:
        """The run's live processes as this side sees them: all of the worker's but its own (one run at a time),
        so a process that left the fork's session and tree is still the run's."""
        proc = self.worker.proc
        if proc is None:
            return set()
        return sandbox.members(proc.pid, self.worker.token, proc.pid) - self.worker.base

    def watched(self) -> set[int]:
        """members(), cheaper: what the worker (the subreaper of everything the run starts) has below it."""
        proc = self.worker.proc
        below = held.descendants(proc.pid) if proc is not None else set()
        return below - self.worker.base if below is not None else self.members()

    def end(self, wait_s: float = 10.0) -> None:
        """Past a limit the parent measured: the run's processes killed, and the worker's report of the exit
        awaited, so that the worker (cleaned up and checked as after any run) takes the next submission."""
        for _ in range(5):
            left = self.members()
            if not left:
                break
            for sig in (signal.SIGSTOP, signal.SIGKILL):      # stopped first: none can fork any more
                for pid in left:
                    try:
                        os.kill(pid, sig)
                    except OSError:
                        pass
            time.sleep(0.05)
        if not self.done:
            self.wait(time.monotonic() + wait_s)

    def stop(self) -> str:
        """Ask the fork for its Python stack (the caller then retires the worker)."""
        return scratch.ask_for_stack(self._host_pid(), self.run_dir)

    def end_fork(self) -> None:
        """SIGKILL the fork alone (a fork that has run nothing yet: early.py); its worker stays, and reports the
        exit once it has cleaned up as after any run (`wait`)."""
        pid = self._host_pid()
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def kill(self) -> None:
        self.worker.after_run(self.done and not self.poisoned)

    def _host_pid(self) -> int | None:
        """The fork's pid as this side sees it (the zygote reports the pid in its own namespace)."""
        proc = self.worker.proc
        if proc is None:
            return None
        for pid in sandbox.members(proc.pid, self.worker.token, proc.pid):
            try:
                with open(f"/proc/{pid}/status") as f:
                    ns = next((ln.split()[1:] for ln in f if ln.startswith("NSpid:")), [])
            except OSError:
                continue
            if ns and int(ns[-1]) == self.nspid and _is_child_of_zygote(pid):
                return pid
        return None


def _is_child_of_zygote(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"harness.child.zygote" in f.read().split(b"\0")
    except OSError:
        return False


def launch_run(worker: Worker, args: list[str], work: Path, nonce: str | None, limits: dict,
               server_fd: int | None = None):
    """A fork of the warm worker for this run: (handle, result fd, stdout fd, stderr fd, key fd). nonce None: a
    deferred run (early.py), the key's pipe left open for the caller to write the key and the LATE limits (the
    key fd; else None). server_fd: a split run's prober's end of the model server's socket (warm_split.py)."""
    fds = []
    try:
        r, w = os.pipe()
        key_r, key_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        fds = [r, w, key_r, key_w, out_r, out_w, err_r, err_w]
        if nonce is not None:
            os.write(key_w, (nonce + "\n").encode())
        # in protocol.FORK_FDS's order: the fork takes them as stdin, stdout, stderr and RESULT_FD
        run = worker.launch(args + wire_argv(RESULT_FD, deferred=nonce is None), work, [key_r, out_w, err_w, w]
                            + ([server_fd] if server_fd is not None else []), limits)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    for fd in (w, key_r, out_w, err_w) + ((key_w,) if nonce is not None else ()):
        os.close(fd)
    return run, r, out_r, err_r, None if nonce is not None else key_w


def _zygote_limits():
    """The worker's own limits; each fork lowers address space, CPU time and processes to its run's."""
    import resource
    os.setsid()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
