"""A pack's split run (isolation/split.py) in a warm slot (issue 45): the prober forked by the slot's warm worker
(child/zygote.py, as for any warm run, given its end of the model server's socket as a fifth descriptor), the model
server forked by the slot's model-server worker (child/modelzygote.py), started beside it on the slot's first split
run and kept while it stays clean.

The model-server worker is started like a cold model server (split.start_server): `python -I -S`, a sandbox that
binds the interpreter, its site folders, the worker's `bin/` (the standalone scripts, read-only) and its `home/`
(writable) and nothing of the grader, the installed packs hidden; its own session, token and limits. Per run this
side empties `home/`, copies the submission there, hands the worker the socket to the prober and the write end of
the server's own output pipe (counted by the runner, SplitRun.output), and after the run kills what is left of the
fork, awaits the worker's report (its clean-up, its own state compared: `poisoned`), checks the worker is back to
its own processes and empties `home/` again; anything else retires it (the next split run starts a fresh one). The
run's cgroup, where delegated, adopts both forks (runner: guard.adopt(run.members())), and the disk watch reads
both folders. `MTXDIAG_WARM_SPLIT=0`: a warm slot runs a split run cold, as before (benches compare). Torch-free.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from ..protocol import CTL_EXIT, CTL_POISONED, CTL_READY, CTL_STARTED
from ..readable import cut
from . import confine, held, sandbox, scratch, split, warm
from .forkcare import __file__ as _FORKCARE

SWITCH = "MTXDIAG_WARM_SPLIT"
ZYGOTE = split.SERVER.with_name("modelzygote.py")
SCRIPTS = (ZYGOTE, split.SERVER, split.WIRE, split.RECORD, Path(_FORKCARE), Path(confine.__file__))


def wanted() -> bool:
    return os.environ.get(SWITCH, "1").strip() != "0"


class ServerWorker(warm.Worker):
    """The slot's model-server worker: `bin/` (its scripts) and `home/` (the run's server folder) in its folder."""

    def start(self) -> None:
        self.spawn()
        self.ready()

    def spawn(self) -> None:
        """Start the worker's process (ready() awaits its imports)."""
        self.bin, self.home = self.slot / "bin", self.slot / "home"
        self.bin.mkdir()
        self.home.mkdir()
        for f in SCRIPTS:
            shutil.copyfile(f, self.bin / f.name)
            os.chmod(self.bin / f.name, 0o444)
        os.chmod(self.bin, 0o555)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            theirs.set_inheritable(True)
            fd = theirs.fileno()
            private = ["--private-tmp"] if self.isolation == "bwrap" else []
            sites = [a for d in sandbox.python_path("bwrap")[1:] for a in ("--site", d)]
            cmd = sandbox.command([sys.executable, "-I", "-S", str(self.bin / ZYGOTE.name), "--control-fd", str(fd),
                                   "--home", str(self.home), "--scratch", json.dumps(sandbox.SCRATCH_MB)]
                                  + sites + private, work=self.home, isolate=self.isolation, pass_fd=fd,
                                  grader=False, run_namespaces=confine.filter_works())
            if self.isolation == "bwrap":      # the packs hidden (split.start_server), the scripts read-only, and
                at = cmd.index("--bind")       # POSIX queues visible (its IPC namespace outlives a run: warm.py)
                cmd[at:at] = [a for d in split._pack_dirs() for a in ("--tmpfs", d)] + \
                    ["--ro-bind", str(self.bin), str(self.bin)]
                cmd[cmd.index("--dev") + 2:cmd.index("--dev") + 2] = ["--mqueue", "/dev/mqueue"]
            env = scratch.env(self.threads, self.home, self.isolation, self.token)
            env.pop("PYTHONPATH", None)
            self.proc = subprocess.Popen(cmd, cwd=self.home, env=env, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(fd,),
                                         preexec_fn=warm._zygote_limits, close_fds=True)
        except OSError as e:
            ours.close()
            raise warm.WarmError(f"could not start a model-server worker: {e}") from None
        finally:
            theirs.close()
        self.sock = ours

    def ready(self) -> None:
        msg = self._recv(time.monotonic() + warm.START_TIMEOUT_S)
        if not msg or CTL_READY not in msg:
            raise warm.WarmError(f"the model-server worker did not start: {msg}")
        self.base = sandbox.members(self.proc.pid, self.token, self.proc.pid)

    def launch_server(self, work: Path, sock: socket.socket, out_w: int, limits: dict) -> "ServerRun":
        """A fresh model server for this run, serving a copy of the run's submission on `sock`, printing into
        `out_w`."""
        split.copy_submission(work, self.home / "repo")
        req = {"limits": limits, "env": {"HOME": str(self.home), "TMPDIR": str(self.home)}}
        try:
            socket.send_fds(self.sock, [json.dumps(req).encode()], [sock.fileno(), out_w])
        except (OSError, AttributeError) as e:
            self.retire()
            raise warm.WarmError(f"the model-server worker did not take the run: {e}") from None
        msg = self._recv(time.monotonic() + 30)
        if not msg or not isinstance(msg.get(CTL_STARTED), int):
            self.retire()
            raise warm.WarmError(f"the model-server worker did not start the run: {msg}")
        self.runs += 1
        return ServerRun(self)

    def after_run(self, clean_exit: bool) -> None:
        """Back to its own processes and an empty `home/`, or retired."""
        if not clean_exit or not self.alive() or sandbox.members(self.proc.pid, self.token, self.proc.pid) - self.base:
            self.retire()
            return
        for entry in list(self.home.iterdir()):
            if entry.is_dir() and not entry.is_symlink():
                scratch.rmtree(entry)
            else:
                entry.unlink(missing_ok=True)
        if any(self.home.iterdir()):
            self.retire()


class ServerRun:
    """One run's model server in the slot's model-server worker."""

    def __init__(self, worker: ServerWorker):
        self.worker, self.done, self.returncode = worker, False, None
        self.poisoned: list[str] = []

    def members(self) -> set[int]:
        proc = self.worker.proc
        return sandbox.members(proc.pid, self.worker.token, proc.pid) - self.worker.base if proc is not None else set()

    def watched(self) -> set[int]:
        proc = self.worker.proc
        below = held.descendants(proc.pid) if proc is not None else set()
        return below - self.worker.base if below is not None else self.members()

    def end(self) -> None:
        """Every process of the run's server killed (stopped first: none can fork any more)."""
        for _ in range(5):
            left = self.members()
            if not left:
                return
            for sig in (signal.SIGSTOP, signal.SIGKILL):
                for pid in left:
                    try:
                        os.kill(pid, sig)
                    except OSError:
                        pass
            time.sleep(0.05)

    def kill(self, wait_s: float = 10.0) -> None:
        """The run's end: its server killed if still there, the worker's report awaited, the worker checked."""
        if self.done or self.worker.proc is None:
            return
        self.end()
        msg = self.worker._recv(time.monotonic() + wait_s)
        if msg is not None and isinstance(msg.get(CTL_EXIT), int):
            self.returncode, self.done = msg[CTL_EXIT], True
            bad = msg.get(CTL_POISONED)
            if bad:
                self.poisoned = [cut(x, 300) for x in bad[:20]] if isinstance(bad, list) else ["(unreadable)"]
        self.worker.after_run(self.done and not self.poisoned)


class WarmSplitRun(split.SplitRun):
    """The prober's warm run (warm.Run) with the model server's beside it: waited for through the prober, both
    watched and adopted, both ended; `poisoned`: what either changed in its worker."""

    def watched(self):
        return set(self.prober.watched()) | self.server.watched()

    def members(self):
        return set(self.prober.members()) | self.server.members()

    def end(self):
        self.server.end()
        self.prober.end()

    def kill(self):
        self.server.kill()
        self.prober.kill()

    @property
    def poisoned(self) -> list[str]:
        return list(self.prober.poisoned) + [f"the model server's worker: {p}" for p in self.server.poisoned]


def beside(worker: warm.Worker):
    """warm.acquire's hook for a split run: the slot's model-server worker starts while its prober's worker does;
    returns what awaits it (one that fails is retired: launch starts a fresh one)."""
    worker.server = srv = ServerWorker(worker.isolation, worker.threads)

    def after():
        try:
            srv.ready()
        except warm.WarmError:
            srv.retire()
            worker.server = None
    try:
        srv.spawn()
    except warm.WarmError:
        srv.retire()
        worker.server = None
        return None
    return after


def server_worker(worker: warm.Worker) -> ServerWorker:
    """The slot's model-server worker, started on its first split run (or after the last one retired)."""
    srv = worker.server
    if srv is not None and srv.alive():
        return srv
    if srv is not None:
        srv.retire()
    worker.server = srv = ServerWorker(worker.isolation, worker.threads)
    try:
        srv.start()
    except warm.WarmError:
        srv.retire()
        worker.server = None
        raise
    return srv


def launch(worker: warm.Worker, args: list[str], work: Path, nonce: str, limits: dict):
    """A split run in a warm slot: (handle, result fd, stdout fd, stderr fd); raises warm.WarmError (the run then
    goes cold)."""
    mine, theirs = socket.socketpair()
    srv_r, srv_w = os.pipe()
    server = None
    try:
        try:
            server = server_worker(worker).launch_server(work, theirs, srv_w, limits)
        except warm.WarmError:          # it died since its last run (and is retired now): a fresh one, once
            server = server_worker(worker).launch_server(work, theirs, srv_w, limits)
        run, r, out_r, err_r, _ = warm.launch_run(worker, args, work, nonce, limits, server_fd=mine.fileno())
    except BaseException:
        os.close(srv_r)
        if server is not None:
            server.kill()
        raise
    finally:
        os.close(srv_w)
        mine.close()
        theirs.close()
    return WarmSplitRun(run, server, worker.token, worker.isolation, srv_r), r, out_r, err_r
