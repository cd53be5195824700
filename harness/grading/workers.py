"""Grading, part 5: the workers. Local threads (each check is its own child process) or a Dask cluster.

Both hand every finished check to `grader._finish` in the grading process, as it completes; on Ctrl-C the
local pool is cancelled and our own running check children are killed.
"""
from __future__ import annotations

import concurrent.futures as cf
import os
import signal
from pathlib import Path

from .discovery import GradeError
from .results import _job, grade_one


def grade_all(grader, todo: list, summary, progress):
    if grader.opts.scheduler:
        _grade_dask(grader, todo, summary, progress)
    else:
        _grade_local(grader, todo, summary, progress)


def _grade_local(grader, todo, summary, progress):
    pool = cf.ThreadPoolExecutor(max_workers=grader.opts.jobs, thread_name_prefix="mtxdiag-grade")
    def one(s):
        progress.started(s.student)
        return grade_one(_job(s, grader.opts), grader.checker)
    futures = {pool.submit(one, s): s for s in todo}
    try:
        for fut in cf.as_completed(futures):
            sub = futures[fut]
            try:
                outcome, exc = fut.result(), None
            except Exception as e:
                outcome, exc = None, e
            grader._finish(sub, outcome, exc, summary, progress)
            sub.data = sub.files = None
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        _stop_children()
        raise
    finally:
        if grader.opts.warm:       # the batch's warm workers (warm.py): retired with the batch
            from ..isolation import warm
            warm.close_all()
    pool.shutdown(wait=True)


def _grade_dask(grader, todo, summary, progress):
    try:
        from dask.distributed import Client, as_completed
    except ImportError:
        raise GradeError("--scheduler needs Dask: pip install 'dask[distributed]'") from None
    try:
        client = Client(grader.opts.scheduler, timeout="20s")
    except Exception as e:
        raise GradeError(f"cannot connect to the Dask scheduler {grader.opts.scheduler}: {e}") from None
    futures = {}
    try:
        for s in todo:
            # reports are rendered on the workers: the drawing is spread over them, not queued here
            f = client.submit(grade_one, dict(_job(s, grader.opts), render=True), grader.checker, pure=False,
                              key=f"mtxdiag-grade-{s.student}-{os.urandom(4).hex()}")
            futures[f] = s
        for fut in as_completed(list(futures)):
            sub = futures[fut]
            try:
                outcome, exc = fut.result(), None
            except Exception as e:
                outcome, exc = None, e
            grader._finish(sub, outcome, exc, summary, progress)
            sub.data = sub.files = None
    except BaseException:
        try:
            client.cancel(list(futures))
        except Exception:
            pass
        raise
    finally:
        client.close()


def _stop_children() -> None:
    """On Ctrl-C: kill the process groups of our own running check children (best effort, Linux)."""
    me = os.getpid()
    pids: set[int] = set()
    try:
        for task in os.listdir(f"/proc/{me}/task"):
            try:
                pids.update(int(p) for p in Path(f"/proc/{me}/task/{task}/children").read_text().split())
            except OSError:
                continue
    except OSError:
        return
    for pid in pids:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"harness.child.main" in cmd:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
