"""A run's scratch folder, environment and limits: shared by the cold child (runner.py) and warm workers
(warm.py, zygote.py)."""
from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import time
from pathlib import Path

from . import memwatch, sandbox
from .forkcare import apply_rlimits  # noqa: F401  (the run's limits: both warm workers' forks set them too)


def env(threads: int, work: Path, isolation: str, token: str) -> dict:
    """A scrubbed environment: nothing of the instructor's (tokens, paths) reaches student code."""
    keep = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                                       "CUDA_VISIBLE_DEVICES", "SYSTEMROOT") if k in os.environ}
    keep.update(PYTHONPATH=os.pathsep.join(dict.fromkeys(sandbox.python_path(isolation))),
                PYTHONDONTWRITEBYTECODE="1", PYTHONSAFEPATH="1", PYTHONHASHSEED="0", MPLBACKEND="Agg",
                HOME=str(work), TMPDIR=str(work), PYTHONNOUSERSITE="1")
    keep[sandbox.TOKEN_VAR] = token
    if threads:
        keep.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    return keep


def read_plain_file(path: Path, keep: int) -> str:
    """The tail of a regular file the child wrote, never following a link it may have planted."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return ""
        os.lseek(fd, max(0, st.st_size - 4 * keep), os.SEEK_SET)
        return os.read(fd, 4 * keep).decode("utf-8", "replace")[-keep:]
    except OSError:
        return ""
    finally:
        os.close(fd)


def rmtree(work: Path):
    def onerror(func, path, exc):
        try:
            os.chmod(os.path.dirname(path), 0o700)
            os.chmod(path, 0o700)
            func(path)
        except OSError:
            pass
    shutil.rmtree(work, onerror=onerror)


STACK_WAIT_S = 3.0     # the longest a stopped run waits for its child's stack dump


def ask_for_stack(pid: int | None, work: Path) -> str:
    """The child's Python stack: faulthandler writes it to work/stack.txt on SIGUSR1; '' when it cannot."""
    if pid is None:
        return ""
    try:
        os.kill(pid, signal.SIGUSR1)
    except OSError:
        return ""
    # faulthandler writes the dump from the signal handler; on a loaded machine (a class graded on every core)
    # that can take longer than a fixed half second: wait until the file is there and has stopped growing
    dump, size, deadline = work / "stack.txt", -1, time.monotonic() + STACK_WAIT_S
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = dump.stat().st_size if dump.exists() else 0
        if now and now == size:
            break
        size = now
    return read_plain_file(dump, 20000)


def rlimits(lim, nproc: int | None, device: str = "cpu") -> dict:
    """The run's resource limits (runner.Limits -> plain numbers): set on a cold child before it starts, and
    by a warm worker's fork on itself (zygote.py). as: None for CUDA (see memwatch.py); nproc: None for root."""
    return {"as": memwatch.address_space_limit(device, lim.memory_mb),
            "cpu": int(lim.timeout_s * max(1, os.cpu_count() or 1)) + 10,
            "fsize": lim.file_mb * 1024 * 1024, "nofile": lim.open_files, "nproc": nproc}


def nproc_limit(lim) -> int | None:
    """RLIMIT_NPROC counts every task of the real user: allow what runs now plus the child's share.

    Root ignores it (and a user namespace does not change that), so nothing is set for root."""
    if not lim.processes or os.geteuid() == 0:
        return None
    uid, n = os.getuid(), 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/status") as f:
                    st = f.read()
                if re.search(rf"^Uid:\s+{uid}\s", st, re.M):
                    m = re.search(r"^Threads:\s+(\d+)", st, re.M)
                    n += int(m.group(1)) if m else 1
            except OSError:
                continue
    return n + lim.processes
