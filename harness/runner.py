"""The parent side: run one submission in a child process and get plain data back.

The child gets a fresh temporary folder holding only a copy of the
submission, a scrubbed environment, resource limits (address space, CPU time,
file size, open files, no core dumps) and its own process group, so that the
whole tree can be killed. Its result arrives as JSON lines on a private pipe;
stdout and stderr are drained in threads and kept only up to a bound.
"""
from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import sandbox

MAX_RESULT_BYTES = 32 * 1024 * 1024
MAX_OUTPUT_BYTES = 256 * 1024


@dataclass
class Limits:
    timeout_s: float = 120.0
    memory_mb: int = 6144
    file_mb: int = 64
    open_files: int = 512
    threads: int = 0


@dataclass
class ChildOutcome:
    """What the parent observed: the validated payload or why there is none."""
    payload: dict | None
    status: str                     # "ok" | "timeout" | "memory" | "crashed" | "no-result" | "grader-fault"
    reason: str = ""
    returncode: int | None = None
    seconds: float = 0.0
    phase: str | None = None        # last phase the child announced
    stdout: str = ""
    stderr: str = ""
    stack: str = ""                 # the child's Python stack when it was stopped for running too long
    phases: list = field(default_factory=list)


class _Drain(threading.Thread):
    """Read a pipe to the end, keeping at most `limit` bytes."""

    def __init__(self, fd, limit, on_line=None):
        super().__init__(daemon=True)
        self.fd, self.limit, self.on_line = fd, limit, on_line
        self.buf, self.size, self.dropped = bytearray(), 0, 0

    def run(self):
        pending = b""
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            room = self.limit - len(self.buf)
            if room > 0:
                self.buf += chunk[:room]
            self.dropped += max(0, len(chunk) - max(room, 0))
            if self.on_line:
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    self.on_line(line)
                if len(pending) > self.limit:
                    pending = b""
        os.close(self.fd)

    def text(self):
        t = self.buf.decode("utf-8", "replace")
        return t + (f"\n[... {self.dropped:,} more bytes not kept]" if self.dropped else "")


def _limits(lim: Limits):
    def apply():
        os.setsid()
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if lim.memory_mb:
            b = lim.memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (b, b))
        cpu = int(lim.timeout_s * max(1, os.cpu_count() or 1)) + 10
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
        resource.setrlimit(resource.RLIMIT_FSIZE, (lim.file_mb * 1024 * 1024,) * 2)
        resource.setrlimit(resource.RLIMIT_NOFILE, (lim.open_files, lim.open_files))
    return apply


def _env(threads: int) -> dict:
    """A scrubbed environment: nothing of the instructor's (tokens, paths) reaches student code."""
    keep = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                                       "CUDA_VISIBLE_DEVICES", "SYSTEMROOT") if k in os.environ}
    root = str(Path(__file__).resolve().parent.parent)
    paths = [root] + [p for p in sys.path if p and "site-packages" in p or "dist-packages" in p]
    keep.update(PYTHONPATH=os.pathsep.join(dict.fromkeys(paths)), PYTHONDONTWRITEBYTECODE="1",
                PYTHONHASHSEED="0", MPLBACKEND="Agg", HOME="/nonexistent", PYTHONNOUSERSITE="1")
    if threads:
        keep.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    return keep


def run_child(submission: str | Path, *, assignment: str = "auto", seed: int = 0, device: str = "cpu",
              quick: bool = False, limits: Limits | None = None, on_event=None,
              isolate: str = "auto") -> ChildOutcome:
    """Run the probes on `submission` in a limited child process; never raises for student faults."""
    lim = limits or Limits()
    submission = Path(submission)
    work = Path(tempfile.mkdtemp(prefix="mtxdiag-"))
    t0 = time.monotonic()
    phases, last = [], {"phase": None}
    payload = {}
    try:
        name = "submission" + (".ipynb" if submission.suffix == ".ipynb" else ".py")
        shutil.copyfile(submission, work / name)
        r, w = os.pipe()
        args = ["--submission", str(work / name), "--display-name", str(submission), "--assignment", assignment,
                "--seed", str(seed), "--device", device, "--result-fd", str(w), "--threads", str(lim.threads)]
        if quick:
            args.append("--quick")
        cmd = sandbox.command([sys.executable, "-m", "harness.child"] + args, work=work, isolate=isolate,
                              pass_fd=w)
        proc = subprocess.Popen(cmd, cwd=work, env=_env(lim.threads), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(w,),
                                preexec_fn=_limits(lim), close_fds=True)
        os.close(w)

        def on_line(line: bytes):
            try:
                msg = json.loads(line)
            except ValueError:
                return
            if not isinstance(msg, dict):
                return
            if msg.get("event") == "phase" and isinstance(msg.get("name"), str):
                last["phase"] = msg["name"][:80]
                phases.append((last["phase"], round(time.monotonic() - t0, 2)))
                if on_event:
                    on_event(last["phase"])
            elif msg.get("event") == "result":
                payload["result"] = msg.get("result")
        res = _Drain(r, MAX_RESULT_BYTES, on_line)
        out = _Drain(os.dup(proc.stdout.fileno()), MAX_OUTPUT_BYTES)
        err = _Drain(os.dup(proc.stderr.fileno()), MAX_OUTPUT_BYTES)
        proc.stdout.close(), proc.stderr.close()
        for d in (res, out, err):
            d.start()
        status, reason, stack = "ok", "", ""
        try:
            proc.wait(timeout=lim.timeout_s)
        except subprocess.TimeoutExpired:
            stack = _stop(proc, work)
            status = "timeout"
            reason = f"did not finish within {lim.timeout_s:.0f} s" + \
                     (f" (while running '{last['phase']}')" if last["phase"] else "")
        _kill_group(proc)
        for d in (res, out, err):
            d.join(timeout=5)
        rc = proc.returncode
        if status == "ok" and "result" not in payload:
            status, reason = _why_died(rc, err.text(), lim)
            if last["phase"]:
                reason += f" (while running '{last['phase']}')"
        return ChildOutcome(payload.get("result") if status == "ok" else None, status, reason, rc,
                            time.monotonic() - t0, last["phase"], out.text(), err.text(), stack, phases)
    except OSError as e:
        return ChildOutcome(None, "grader-fault", f"could not start the child process: {e}",
                            seconds=time.monotonic() - t0)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _stop(proc, work: Path) -> str:
    """Ask the child for its Python stack (faulthandler on SIGUSR1), then kill the whole group."""
    stack = ""
    try:
        os.killpg(proc.pid, signal.SIGUSR1)
        time.sleep(0.5)
        p = work / "stack.txt"
        if p.exists():
            stack = p.read_text(errors="replace")[-20000:]
    except OSError:
        pass
    _kill_group(proc)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    return stack


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _why_died(rc, stderr: str, lim: Limits):
    if rc is not None and rc < 0:
        sig = -rc
        if sig == signal.SIGKILL:
            return "memory", f"was killed (SIGKILL); most likely it exceeded the memory limit of {lim.memory_mb} MB"
        if sig == signal.SIGXCPU:
            return "timeout", "exceeded its CPU-time limit"
        if sig == signal.SIGXFSZ:
            return "crashed", f"wrote a file larger than {lim.file_mb} MB"
        return "crashed", f"was killed by signal {signal.Signals(sig).name}"
    if "MemoryError" in stderr or "std::bad_alloc" in stderr or "DefaultCPUAllocator: can't allocate" in stderr:
        return "memory", f"ran out of memory (limit {lim.memory_mb} MB)"
    return "no-result", f"exited with status {rc} before sending a result (e.g. sys.exit or os._exit in the code)"


def stack_line(stack: str, path: str) -> int | None:
    """The innermost line of the student's file in a faulthandler dump."""
    lines = re.findall(r'File "([^"]+)", line (\d+)', stack)
    # faulthandler prints the innermost frame first
    for f, n in lines:
        if f == path or f.endswith("/submission.py") or f.endswith("/submission.ipynb"):
            return int(n)
    return None
