"""A run's scratch folder and environment: shared by the cold child (runner.py) and warm workers (warm.py)."""
from __future__ import annotations

import os
import shutil
import signal
import stat
import time
from pathlib import Path

from . import sandbox


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


def ask_for_stack(pid: int | None, work: Path) -> str:
    """The child's Python stack: faulthandler writes it to work/stack.txt on SIGUSR1; '' when it cannot."""
    if pid is None:
        return ""
    try:
        os.kill(pid, signal.SIGUSR1)
    except OSError:
        return ""
    time.sleep(0.5)
    return read_plain_file(work / "stack.txt", 20000)
