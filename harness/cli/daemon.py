"""The per-user check daemon (see daemon.py for why and when it is used): warm workers for `mtxdiag check`.

    python -m harness.cli.daemon --dir RUNTIME_DIR --key KEY [--idle S]

It listens on RUNTIME_DIR/KEY.sock (mode 0600, in a 0700 folder) and answers one request per connection,
as JSON lines: `check` runs runner.run_child in a warm worker (Limits.warm) and streams the child's phases,
then the outcome; `status` and `stop` are what `mtxdiag daemon` asks. A connection from another uid is
closed unanswered. A check whose client goes away (Ctrl-C) is killed with its worker. After each check it
starts the next worker in the background when none is left idle (a run that timed out retires its worker),
so the next check finds one ready. Without a check for `--idle` seconds, on SIGTERM, or when its socket is
removed (its folder deleted: no check can reach it any more), it exits, and its workers with it (bubblewrap's --die-with-parent and the zygote's parent-death signal).

Workers are started from one long-lived thread only: a parent-death signal fires when the *thread* that
started the process ends, so a worker started from a connection's thread would die with that connection.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import signal
import socket
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path

from ..isolation import daemon, sandbox, warm
from ..protocol import CheckSpec
from ..runner import run_spec

MAX_REQUEST = daemon.MAX_REQUEST


class Server:
    def __init__(self, d: Path, key: str, idle_s: float):
        self.sock_path, self.info_path = d / f"{key}.sock", d / f"{key}.json"
        self.idle_s = idle_s
        self.starter = ThreadPoolExecutor(1, thread_name_prefix="mtxdiag-daemon-start")
        self.lock = threading.Lock()
        self.active, self.runs, self.last = 0, 0, time.monotonic()
        self.started = time.time()
        self.stopping = threading.Event()
        self.isolation = sandbox.mode("auto")

    # -- life ----------------------------------------------------------------------------------------
    def serve(self) -> int:
        listener = self._listen()
        if listener is None:
            return 0                          # another daemon of the same key already answers
        ino = os.stat(self.sock_path).st_ino
        signal.signal(signal.SIGTERM, lambda *_: self.stopping.set())
        signal.signal(signal.SIGINT, signal.SIG_IGN)     # the terminal's Ctrl-C is the client's, not ours
        self.info_path.write_text(json.dumps({"pid": os.getpid(), "started": self.started}))
        self._prewarm()
        listener.settimeout(0.5)
        try:
            while not self.stopping.is_set():
                with self.lock:
                    idle = self.active == 0 and time.monotonic() - self.last > self.idle_s
                if idle or not _still_there(self.sock_path, ino):     # its folder removed: nobody can reach it
                    break
                try:
                    conn, _ = listener.accept()
                except socket.timeout:
                    continue
                except OSError:
                    break
                if not _same_user(conn):
                    conn.close()
                    continue
                threading.Thread(target=self._handle, args=(conn,), daemon=True).start()
        finally:
            try:
                if os.stat(self.sock_path).st_ino == ino:     # never remove a later daemon's socket
                    self.sock_path.unlink()
                    self.info_path.unlink(missing_ok=True)
            except OSError:
                pass
            listener.close()
            warm.close_all()
        return 0

    def _listen(self) -> socket.socket | None:
        """The listening socket; None when another daemon of this key holds KEY.lock (it lives as long as
        its daemon: a lock that can be taken means any socket file left is a dead daemon's)."""
        self.lock_fd = os.open(self.sock_path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return None
        self.sock_path.unlink(missing_ok=True)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            s.bind(str(self.sock_path))
        finally:
            os.umask(old)
        s.listen(16)
        return s

    def _prewarm(self) -> None:
        """Start a worker now (in the starter thread), unless one is idle: the next check forks it."""
        def start():
            if warm.idle_count(self.isolation, 0) == 0:
                w = warm.acquire(self.isolation, 0)
                if w is not None:
                    warm.release(w)
        self.starter.submit(start)

    # -- one connection ------------------------------------------------------------------------------
    def _handle(self, conn: socket.socket) -> None:
        with self.lock:
            self.active += 1
        try:
            req = _request(conn)
            op = req.get("op") if req else None
            if op == "check":
                self._check(conn, req)
            elif op == "repair":
                self._repair(conn, req)
            elif op == "status":
                with self.lock:
                    _send(conn, {"pid": os.getpid(), "since": self.started, "checks": self.runs,
                                 "running": self.active - 1, "idle_workers": warm.idle_count(self.isolation, 0),
                                 "idle_exit_s": self.idle_s})
            elif op == "stop":
                _send(conn, {"pid": os.getpid(), "stopping": True})
                self.stopping.set()
            else:
                _send(conn, {"error": "not a request this daemon knows"})
        except OSError:
            pass
        finally:
            conn.close()
            with self.lock:
                self.active -= 1
                self.last = time.monotonic()

    def _check(self, conn: socket.socket, req: dict) -> None:
        try:
            spec = CheckSpec.from_json({k: v for k, v in req.items() if k != "op"})
            spec = replace(spec, device="cpu", limits=replace(spec.limits, warm=True))
        except (TypeError, ValueError) as e:
            _send(conn, {"error": f"a malformed check request: {e}"})
            return
        held, done = [], threading.Event()
        send_lock = threading.Lock()

        def acquire(isolation, threads):
            w = self.starter.submit(warm.acquire, isolation, threads).result()
            held.append(w)
            if gone.is_set() and not done.is_set() and w is not None:
                w.abort()
            return w

        def abort_held():
            if not done.is_set():              # after the run its worker is idle again: leave it alone
                for w in held:
                    if w is not None:
                        w.abort()

        def event(name):
            with send_lock:
                try:
                    _send(conn, {"event": name})
                except OSError:
                    pass

        gone = _client_gone(conn, then=abort_held)
        outcome = run_spec(spec, on_event=event, acquire=acquire)
        done.set()
        with self.lock:
            self.runs += 1
        if not gone.is_set() and not self.stopping.is_set():   # stopping: its worker may have been closed
            with send_lock:                                   # under it; the client runs it cold instead
                _send(conn, {"outcome": asdict(outcome)})
        self._prewarm()

    def _repair(self, conn: socket.socket, req: dict) -> None:
        """A checked result's repairs (daemon.repair): repair_check here, its re-checks in this daemon's workers
        (started from the starter thread, as a check's are). Student code runs only in those forks; what runs
        here reads the student's file as text (LibCST) and the re-checks' validated results."""
        try:
            spec = CheckSpec.from_json(req["spec"])
            spec = replace(spec, device="cpu", limits=replace(spec.limits, warm=True))
            part = req["result"]
            if not (isinstance(part, dict) and isinstance(part.get("checks"), list)
                    and isinstance(part.get("diagnoses"), list)):
                raise ValueError("no checks or diagnoses")
        except (KeyError, TypeError, ValueError) as e:
            _send(conn, {"error": f"a malformed repair request: {e}"})
            return
        from ..repair.run import Cancelled, repair_check
        gone = _client_gone(conn)   # Ctrl-C in the client: no more candidates re-checked for nobody

        def note(text):
            try:
                _send(conn, {"note": text})
            except OSError:
                pass
        try:
            repair_check(part, spec.path, seed=spec.seed, limits=spec.limits, say=note, cancelled=gone.is_set,
                         acquire=lambda isolation, threads: self.starter.submit(warm.acquire, isolation,
                                                                                 threads).result())
        except Cancelled:
            return
        except Exception as e:      # noqa: BLE001 - the client makes them itself
            _send(conn, {"error": f"the repairs failed here ({type(e).__name__})"})
            return
        with self.lock:
            self.runs += 1
        if not self.stopping.is_set():
            _send(conn, {"repaired": {"diagnoses": part["diagnoses"],
                                      "repair_s": (part.get("timings") or {}).get("repair_s")}})
        self._prewarm()


def _client_gone(conn: socket.socket, then=None) -> threading.Event:
    """Set once the client's end of `conn` closes (it sends nothing after its request: EOF means it gave up);
    `then()` runs right after it is set (a check's: abort the worker its run holds)."""
    gone = threading.Event()

    def watch():
        try:
            conn.recv(1)
        except OSError:
            pass
        gone.set()
        if then is not None:
            then()
    threading.Thread(target=watch, name="mtxdiag-client-watch", daemon=True).start()
    return gone


def _still_there(path: Path, ino: int) -> bool:
    try:
        return os.stat(path).st_ino == ino
    except OSError:
        return False


def _request(conn: socket.socket) -> dict | None:
    conn.settimeout(10)
    buf = b""
    while b"\n" not in buf and len(buf) < MAX_REQUEST:
        data = conn.recv(1 << 16)
        if not data:
            return None
        buf += data
    conn.settimeout(None)
    try:
        msg = json.loads(buf.split(b"\n", 1)[0])
    except ValueError:
        return None
    return msg if isinstance(msg, dict) else None


def _send(conn: socket.socket, msg: dict) -> None:
    conn.sendall((json.dumps(msg) + "\n").encode())


def _same_user(conn: socket.socket) -> bool:
    try:
        _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                        struct.calcsize("3i")))
    except OSError:
        return False
    return uid == os.getuid()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True, type=Path)
    ap.add_argument("--key", required=True)
    ap.add_argument("--idle", type=float, default=600.0)
    a = ap.parse_args()
    from ..isolation.confine import undumpable
    undumpable()        # as the mtxdiag command (cli/main.py): a run's code of the same user cannot write its memory
    os._exit(Server(a.dir, a.key, a.idle).serve())
