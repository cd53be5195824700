"""A warm worker, inside the sandbox: torch imported once, a fresh forked child per submission.

`grade` and `selftest` start one per job slot (warm.py, in the grading process). It runs under the same
sandbox and limits as a cold child (runner.py), in the slot's own folder, and does only this:

* imports what every check imports (torch, torch._dynamo, the probes, numpy and matplotlib when present) and
  runs no tensor operation (a forked OpenMP pool would hang);
* becomes the subreaper of everything below it and non-dumpable (no process of the sandbox can read or
  write its memory or descriptors);
* per request on its control socket (a JSON message and four descriptors: the key pipe, stdout, stderr,
  the result pipe; a pack's split run's prober a fifth, its end of the model server's socket, which the fork
  takes at protocol.SERVER_FD: isolation/warm_split.py), forks; the fork closes the socket, starts its own session, enters a user, an IPC and a
  mount namespace of its own with no capability in them (confine.private_namespaces), where /tmp, /var/tmp
  and /dev/shm are new empty size-capped tmpfs that die with the run, takes the descriptors as
  0, 1, 2 and 3, sets every limit to the worker's recorded one and then the run's own (address space, CPU
  time, processes, file size, open files), moves into the run's
  folder, draws fresh random seeds and runs `harness.child.main` exactly as a cold child does;
* after the fork exits: kills every process left below it, reaps them, empties its own /tmp, /var/tmp,
  /dev/shm and /dev/mqueue (where a run could not have its own), removes System V IPC objects, compares its
  own limits, nice value, scheduling policy and CPU affinity (every thread's) with those it recorded at
  start (confine.py), and only then reports the exit
  status; a change, or a folder it could not empty, is reported with it (`poisoned`) and the worker exits,
  so the next submission gets a fresh one. The grading process checks that no process of the run is left
  and empties the slot's folder before the next request.

What it does around each fork is isolation/forkcare.py, which the model server's warm worker (modelzygote.py)
runs too. Student code never runs in this process: it runs only in the forks, each of which starts from the state
this process had before the first submission.
"""
from __future__ import annotations

import gc
import os
import socket
import sys

from ..isolation import forkcare
from ..protocol import CTL, FORK_FDS, SERVER_FD, SERVER_FD_VAR


def _warm_up() -> None:
    """Import what a check imports, without computing anything."""
    import torch
    torch.set_num_threads(1)
    import torch._dynamo  # noqa: F401  (child.main imports it before recording torch's functions)

    import reference_model.reversal  # noqa: F401  (the calibration step's model)

    from . import audit, calibrate, capture, main as child, side as child_side, lm_loader, loader  # noqa: F401
    from .probes import PROBES  # noqa: F401
    try:
        import matplotlib
        import numpy  # noqa: F401
        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401  (the lessons import it; 0.4 s a submission)
    except Exception:
        pass
    # Out of the garbage collector's sight from now on: a full collection in a fork walks every object and
    # so writes to (copies) every page the fork shares with this worker; one such collection made parsing
    # a student's file take 0.6 s instead of 16 ms. These objects live as long as the worker anyway.
    gc.collect()
    gc.freeze()


def _fork_run(req: dict, fds: list[int], control: socket.socket, base: dict, private: bool = False) -> None:
    """In the fork: become a fresh child for this run, then run harness.child.main. Never returns. A split run's
    prober (issue 45) gets a fifth descriptor, its end of the model server's socket, at SERVER_FD."""
    code = 1
    try:
        control.close()
        os.setsid()
        if private:                    # in bubblewrap's sandbox: user, IPC and mount namespaces of this run's own,
            from ..isolation.confine import private_namespaces    # its /tmp, /var/tmp and /dev/shm new and empty
            from ..isolation.sandbox import SCRATCH_MB
            private_namespaces(forkcare.fresh_places(SCRATCH_MB))
        forkcare.place(fds, FORK_FDS + (SERVER_FD,))
        if len(fds) > len(FORK_FDS):
            req["env"][SERVER_FD_VAR] = str(SERVER_FD)
        sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
        sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
        sys.__stdout__, sys.__stderr__ = sys.stdout, sys.stderr
        from ..isolation.confine import restore
        from ..isolation.scratch import apply_rlimits
        restore(base)                  # every limit, nice, policy and affinity: the worker's recorded ones
        apply_rlimits(req["limits"])   # then the run's own, as a cold child gets them (runner._limits)
        os.chdir(req["run"])
        import tempfile
        was = tempfile.gettempdir()       # the worker's (its slot folder): torch's imports derived paths from it
        os.environ.update(req["env"])
        tempfile.tempdir = None           # recomputed from this run's TMPDIR, as in a cold child
        for k, v in list(os.environ.items()):      # e.g. TORCHINDUCTOR_CACHE_DIR, set by importing torch._dynamo
            if k not in req["env"] and v.startswith(was + os.sep):
                os.environ[k] = req["run"] + v[len(was):]
        import random
        random.seed()
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        from . import main as child
        sys.argv = [child.__file__] + list(req["argv"])
        code = child.entry(list(req["argv"]))
    except BaseException:
        try:
            import traceback
            traceback.print_exc()
        except BaseException:
            pass
    os._exit(code)


def serve(control_fd: int, private: bool) -> int:
    control = socket.socket(fileno=control_fd)
    control.set_inheritable(False)
    forkcare.prepare(private)
    _warm_up()
    from ..isolation import confine
    base = confine.own_state()     # what every run starts from, and what this worker must still be after it
    slot = os.path.realpath(os.getcwd())   # this worker's folder, bound from the host
    return forkcare.serve(control, len(FORK_FDS) + 1, lambda req, fds, ctl: _fork_run(req, fds, ctl, base, private),
                          base, confine.changes, private, slot, CTL, optional=1)


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--control-fd", type=int, required=True)
    ap.add_argument("--private-tmp", action="store_true", help="/tmp, /dev/shm and IPC are the sandbox's own")
    a = ap.parse_args()
    os._exit(serve(a.control_fd, a.private_tmp))
