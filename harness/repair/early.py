"""A repair's first re-check started before its candidate exists: the fork starts up while the parent makes it.

A re-check's fork spends ~50 ms of its ~0.55 s before it reads the submission (the fork, then recording every
function the checks rely on: capture.capture), and the parent spends ~75 ms before it can ask for the
re-check (LibCST's parse of the student's file, the first edit, which probes that edit can reach). `launch`
starts the fork with every limit but the LATE ones (protocol.LATE: which probes, the gate - they depend on the
edit); the fork records its functions, then waits on stdin for its key. `runner.run_spec(spec, early=E)` puts
the candidate where the fork reads it, then sends the key and the LATE limits; from there it is the usual run
(the same sandbox, limits, result channel and checks of the result). A spec that differs from the launched one
in anything but LATE is not run there: that fork is given up (`cancel`) and the run starts as usual.

Warm workers only (CPU): a cold child would pay its interpreter either way.
"""
from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import replace
from pathlib import Path

from ..isolation import sandbox, warm
from ..protocol import LATE, CheckSpec
from ..isolation.scratch import rlimits

SUBMISSION = "submission.py"      # the name runner.run_spec gives a .py submission's copy in its run folder


class Early:
    """A started fork waiting for its run; `go` gives it one, `cancel` gives it up. Either exactly once."""

    def __init__(self, worker, work: Path, nonce: str, t0: float, launched: CheckSpec, handles: tuple):
        self.worker, self.work, self.nonce, self.t0 = worker, work, nonce, t0
        self.launched, self.handles = launched, handles     # handles: run, result fd, stdout fd, stderr fd, key fd
        self.path = launched.path           # the copy the fork will read (run_spec puts the submission there)
        self.used = False

    def fits(self, child_spec: CheckSpec) -> bool:
        """The fork was started for this run: the same spec as launched once its LATE limits are the launch's."""
        blank = replace(child_spec.limits, **{k: getattr(self.launched.limits, k) for k in LATE})
        return not self.used and replace(child_spec, limits=blank) == self.launched

    def go(self, child_spec: CheckSpec) -> tuple:
        """(run, result fd, stdout fd, stderr fd): the key and `child_spec`'s LATE limits sent to the fork (the
        submission's copy must be in place). Raises OSError when the fork cannot take them (it died)."""
        self.used = True
        run, r, out, err, key_w = self.handles
        late = json.dumps({k: getattr(child_spec.limits, k) for k in LATE})
        try:
            os.write(key_w, f"{self.nonce}\n{late}\n".encode())
        except OSError:
            for fd in (r, out, err):
                os.close(fd)
            raise
        finally:
            os.close(key_w)
        return run, r, out, err

    def cancel(self) -> None:
        """No run for the fork: it reads end-of-file for its key and ends before loading anything; its worker
        is cleaned as after any run (or retired when it does not end at once) and goes back to the pool."""
        if self.used:
            return
        self.used = True
        run, r, out, err, key_w = self.handles
        os.close(key_w)         # end-of-file where it reads its key: it ends there, if still alive
        run.end_fork()          # no need to wait for it to get there (~50 ms): it has not run anything yet
        try:
            run.wait(time.monotonic() + 10)
            run.kill()
        finally:
            for fd in (r, out, err):
                os.close(fd)
            warm.release(self.worker)


def launch(spec: CheckSpec, acquire=None) -> Early | None:
    """Start the fork for a re-check of `spec` (a .py file; its LATE limits are sent later), or None where
    nothing can be started early (not a warm CPU run, no worker): the run then starts as usual."""
    lim = spec.limits
    if not (lim.warm and spec.device == "cpu" and Path(spec.path).suffix == ".py"):
        return None
    t0 = time.monotonic()
    try:
        isolation = sandbox.mode(spec.isolate)
        worker = (acquire or warm.acquire)(isolation, lim.threads)
    except (RuntimeError, warm.Stopped):
        return None
    if worker is None:
        return None
    from ..isolation.scratch import nproc_limit
    work = worker.new_run_dir()
    launched = replace(spec, limits=replace(lim, **{k: "" for k in LATE})).for_child(str(work / SUBMISSION),
                                                                                    isolation)
    try:
        handles = warm.launch_run(worker, launched.to_argv(), work, None, rlimits(lim, nproc_limit(lim)))
    except Exception:        # noqa: BLE001 - it could not take the run (retired): the re-check starts as usual
        worker.retire()
        return None
    return Early(worker, work, secrets.token_hex(16), t0, launched, handles)
