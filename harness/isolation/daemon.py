"""`mtxdiag check` through a per-user check daemon: the client side.

A cold check starts a sandbox and an interpreter and imports torch and `torch._dynamo` before it runs a
single probe: about 5 s of an 8 s quick check on a busy two-core machine. A student runs `check` after
every edit, so the first check starts a daemon (daemon_server.py) that keeps a warm worker (warm.py: a
sandboxed process with those imports done) and every later check is a fresh fork of it, exactly as in
`grade` and `watch`: its own process, limits, folder and keyed result channel; nothing of one check's code
survives into the next. The daemon is trusted harness code running as the user, outside the sandbox, like
the process that runs `grade`; student code runs only in the forks. `check --repair` asks it for the repairs
too (`repair`): LibCST and the file's parse stay warm there, and the command does not import them while the
check runs (a quarter of a second of the two cores the check uses).

Which daemon a check may use is decided by a key over everything a check's result depends on outside its
arguments: the interpreter, the harness's and the mutants' source files (names, sizes, modification
times), the installed torch, and the environment variables the child inherits. A changed file or
another interpreter gets another daemon; an old one ends after `IDLE_S` seconds without a check.

Where the daemon cannot be used (turned off with MTXDIAG_DAEMON=0 or `--no-daemon`, CUDA, no private
runtime folder, a daemon that does not answer or dies mid-check), the check runs cold, as before: the
daemon only ever saves time, it never decides a result. The socket lives in a folder only this user can
enter (MTXDIAG_RUNTIME_DIR, else $XDG_RUNTIME_DIR/mtxdiag, else /tmp/mtxdiag-<uid>); the daemon also checks
the peer's uid on every connection. A bubblewrap sandbox has its own empty /tmp and never sees it.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from ..readable import cut
from ..identity import PACKAGES
from ..outcome import ChildOutcome
from ..protocol import CheckSpec

IDLE_S = 600.0              # a daemon without a check for this long exits (and its worker with it)
MAX_REQUEST = 1 << 22       # a request's JSON line (daemon_server reads no more): a repair sends the checks
ANSWER_SLACK_S = 180.0      # past the check's own limit: the worker's start, the report of the outcome
ENV, DIR_ENV = "MTXDIAG_DAEMON", "MTXDIAG_RUNTIME_DIR"
INHERITED = ("PATH", "LANG", "LC_ALL", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "CUDA_VISIBLE_DEVICES",
             "SYSTEMROOT")  # what scratch.env passes to the child: a daemon started under others differs


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "off", "no", "false")


def runtime_dir(create: bool = True) -> Path | None:
    """The private folder of this user's daemons; None when it is not private (then no daemon is used)."""
    if os.environ.get(DIR_ENV):
        d = Path(os.environ[DIR_ENV])
    elif os.environ.get("XDG_RUNTIME_DIR"):
        d = Path(os.environ["XDG_RUNTIME_DIR"]) / "mtxdiag"
    else:
        d = Path(tempfile.gettempdir()) / f"mtxdiag-{os.getuid()}"
    try:
        if create:
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(d)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None          # someone else's, a link, or open to others: never talk through it
    return d


def key() -> str:
    """What a daemon's results depend on beyond a check's arguments (see the module's text)."""
    h = hashlib.sha256()
    h.update(os.path.realpath(sys.executable).encode())
    for k in INHERITED:
        h.update(f"\0{k}={os.environ.get(k, '')}".encode())
    root = Path(__file__).resolve().parents[2]
    for pkg in PACKAGES:
        for f in sorted((root / pkg).rglob("*")):
            if f.suffix in (".py", ".pt", ".toml", ".html", ".json") and "__pycache__" not in f.parts:
                st = f.stat()
                h.update(f"\0{f.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}".encode())
    try:
        from importlib.metadata import version
        h.update(f"\0torch={version('torch')}".encode())
    except Exception:       # noqa: BLE001 - no metadata: the source key above still separates checkouts
        pass
    return h.hexdigest()[:20]


def check(spec: CheckSpec, *, on_event=None, say=None) -> ChildOutcome | None:
    """The check's outcome from this user's daemon; None: run it cold instead (and then call start()).

    No daemon is started here: the first check of a session runs cold at a cold check's speed and the CLI
    starts the daemon (start()) once its report is written, which warms up while the student reads it; a check that arrives
    meanwhile waits for that warm-up instead of starting another. `say(text)`: why a running daemon could
    not be used (unexpected; nothing is said when there is none, or it is turned off)."""
    d = runtime_dir() if enabled() else None
    if d is None:
        if enabled() and say:
            say("the check daemon's folder is not private to this user; checking without it")
        return None
    spec = replace(spec, path=str(Path(spec.path).resolve()), display=spec.shown())   # the daemon's cwd is not ours
    req = dict(spec.to_json(), op="check")       # protocol.CheckSpec's fields
    conn = _connect(d / f"{key()}.sock", 5.0)
    if conn is None:
        return None
    try:
        conn.settimeout(spec.limits.timeout_s + ANSWER_SLACK_S)
        conn.sendall((json.dumps(req) + "\n").encode())
        for msg in _lines(conn):
            if "event" in msg and on_event is not None:
                on_event(msg["event"])
            elif "outcome" in msg:
                return ChildOutcome(**msg["outcome"])
            elif "error" in msg:
                if say:
                    say(f"the check daemon could not run it ({msg['error']}); checking without it")
                return None
    except (OSError, ValueError, TypeError) as e:
        if say:
            say(f"the check daemon stopped answering ({e.__class__.__name__}); checking without it")
        return None
    finally:
        conn.close()
    if say:
        say("the check daemon ended before the check did; checking without it")
    return None


def repair(result: dict, spec: CheckSpec, *, say=None) -> bool:
    """The repairs of a checked result (repair/run.py's repair_check), made by this user's daemon: LibCST and
    the file's parse are warm there, and each candidate's re-check runs in its workers with no round trip of
    its own. Applied to `result` in place (its diagnoses, timings' repair_s; its coverage record is read and
    dropped, as repair_check does). False: nothing was changed, make them here."""
    d = runtime_dir() if enabled() else None
    if d is None or spec.device != "cpu":
        return False
    spec = replace(spec, path=str(Path(spec.path).resolve()), display=spec.shown())
    part = {k: result[k] for k in ("checks", "diagnoses", "timings", "coverage", "assignment") if k in result}
    data = (json.dumps({"op": "repair", "spec": spec.to_json(), "result": part}) + "\n").encode()
    if len(data) > MAX_REQUEST:
        return False
    conn = _connect(d / f"{key()}.sock", 5.0)
    if conn is None:
        return False
    sent = [x.get("id") for x in result.get("diagnoses", []) if isinstance(x, dict)]
    try:        # every candidate is a re-check: the answer may take as long as a few checks
        conn.settimeout(spec.limits.timeout_s + ANSWER_SLACK_S)
        conn.sendall(data)
        for msg in _lines(conn):
            if "note" in msg and say:
                say(cut(msg["note"], 500))
            elif "repaired" in msg:
                got = msg["repaired"]
                diags = got.get("diagnoses") if isinstance(got, dict) else None
                if not isinstance(diags, list) or sorted(map(str, (x.get("id") for x in diags if isinstance(x, dict)))) \
                        != sorted(map(str, sent)):
                    return False        # not the diagnoses it was given: make them here
                result["diagnoses"] = diags
                result.pop("coverage", None)
                if isinstance(got.get("repair_s"), (int, float)):
                    result.setdefault("timings", {})["repair_s"] = got["repair_s"]
                return True
            elif "error" in msg:
                return False
    except (OSError, ValueError, TypeError, AttributeError):
        return False
    finally:
        conn.close()
    return False


def running() -> bool:
    """This install's daemon has its socket (it likely answers: a check through it still falls back)."""
    try:
        d = runtime_dir(create=False) if enabled() else None
        return d is not None and (d / f"{key()}.sock").exists()
    except OSError:
        return False


def ask(op: str, everyone: bool = True) -> list[dict]:
    """Send `op` ("status" or "stop") to this user's daemons, their answers: every one, or (everyone=False)
    only the one this install would use (its key(): this interpreter, this checkout, these settings), so
    that stopping ours never ends another install's check."""
    d = runtime_dir(create=False)
    out = []
    socks = sorted(d.glob("*.sock")) if d else []
    if not everyone:
        mine = key()
        socks = [s for s in socks if s.stem == mine]
    for sock in socks:
        conn = _connect(sock, 2.0)
        if conn is None:
            continue
        try:
            conn.sendall((json.dumps({"op": op}) + "\n").encode())
            out.extend(dict(m, key=sock.stem) for m in _lines(conn))
        except (OSError, ValueError):
            pass
        finally:
            conn.close()
    return out


def _lines(conn: socket.socket):
    buf = b""
    while True:
        data = conn.recv(1 << 20)
        if not data:
            return
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            msg = json.loads(line)
            if isinstance(msg, dict):
                yield msg


def _connect(path: Path, timeout: float) -> socket.socket | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(str(path))
        return s
    except OSError:
        s.close()
        return None


def start() -> bool:
    """Start this user's daemon for this key in the background, unless one answers; False when it cannot be.

    Two checks that start one at once are safe: a daemon holds KEY.lock for its life and a second one exits."""
    d = runtime_dir() if enabled() else None
    if d is None:
        return False
    k = key()
    if len(os.fsencode(d / f"{k}.sock")) > 107:       # longer than a Unix socket's address can be
        return False
    conn = _connect(d / f"{k}.sock", 1.0)
    if conn is not None:
        conn.close()
        return True
    try:
        _spawn(d, k)
    except OSError:
        return False
    return True


def _spawn(d: Path, k: str) -> subprocess.Popen:
    """The daemon, in its own session and with no terminal, so that it outlives this command."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root] + [p for p in os.environ.get("PYTHONPATH", "").split(
        os.pathsep) if p]))
    with open(d / f"{k}.log", "wb") as log:
        return subprocess.Popen([sys.executable, "-m", "harness.cli.daemon", "--dir", str(d), "--key", k,
                                 "--idle", str(float(os.environ.get("MTXDIAG_DAEMON_IDLE_S", IDLE_S)))],
                                cwd=d, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
