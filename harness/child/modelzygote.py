"""The model server's warm worker (issue 45): torch imported once per job slot, a fresh model server forked per run.

A standalone script like modelserver.py: the grading process (isolation/warm_split.py) copies it into the slot's
read-only `bin/` folder with modelserver.py, modelwire.py, modelrecord.py and the two standalone helpers both warm
workers share (isolation/forkcare.py, isolation/confine.py), and starts it as a cold model server is started:
`python -I -S modelzygote.py --control-fd N --home DIR --site DIR... [--scratch JSON]`, in the same sandbox
(the interpreter, its site folders, `bin/` read-only and the slot's server folder `home/`, which the grading
process empties and refills with each run's copy of the submission: no harness, no reference, no mutants). It
imports torch and the model server, computes nothing, and per request (a JSON message and two descriptors: the
socket to the run's prober, the write end of the pipe the grading process counts as the server's stdout and
stderr) forks. The fork is what a cold server is: its own session; with bubblewrap its own user, IPC and mount
namespaces with fresh empty /tmp, /var/tmp and /dev/shm (confine.private_namespaces) and no capability, then the
seccomp filter that keeps it off this worker and from making another user namespace (confine.protect: a cold
server's sandbox forbids that with --disable-userns); the worker's recorded limits and then the run's own; stdin
/dev/null, stdout and stderr the counted pipe, the socket at descriptor 4; fresh seeds; then modelserver.Server.
After the fork exits the worker kills and reaps what is left, scrubs, compares its own state and reports
(forkcare.serve): a change is `poisoned` and the worker exits. Student code never runs in this process.
"""
from __future__ import annotations

import gc
import json
import os
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# protocol.CTL, FORK's descriptor numbers (stdin, stdout, stderr, protocol.SERVER_FD): this script imports nothing
# of the grader, so the values are written here (tests/unit/test_model_zygote.py compares them with protocol's)
CTL = ("ready", "started", "exit", "poisoned", "error")
SOCKET_FD = 4
SCRATCH_MB = {"/tmp": 256, "/var/tmp": 64, "/dev/shm": 256}     # the sandbox's (sandbox.SCRATCH_MB), by argv


def _fork_run(req: dict, fds: list[int], control: socket.socket, base: dict, private: bool, scratch: dict,
              home: str) -> None:
    """In the fork: become a fresh model server for this run. Never returns."""
    import confine
    import forkcare
    code = 1
    try:
        control.close()
        os.setsid()
        if private:
            confine.private_namespaces(forkcare.fresh_places(scratch))
        confine.protect(confine.tids_of(os.getppid()) + [1])        # this worker and pid 1 out of the run's reach
        null = os.open(os.devnull, os.O_RDONLY)
        forkcare.place([null, fds[1], fds[1], fds[0]], (0, 1, 2, SOCKET_FD))
        sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
        sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
        sys.__stdout__, sys.__stderr__ = sys.stdout, sys.stderr
        confine.restore(base)
        forkcare.apply_rlimits(req["limits"])
        os.chdir(home)
        os.environ.update({k: str(v) for k, v in (req.get("env") or {}).items()})
        import tempfile
        tempfile.tempdir = None
        sys.path[0] = home                  # as a cold server's: its script's folder
        import random
        random.seed()
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        import modelserver
        modelserver.Server(SOCKET_FD, os.path.join(home, "repo")).serve()
        code = 0
    except BaseException:
        try:
            import traceback
            traceback.print_exc()
        except BaseException:
            pass
    os._exit(code)


def main(argv: list[str]) -> int:
    fd, home, sites, private, scratch = None, ".", [], False, dict(SCRATCH_MB)
    it = iter(argv)
    for a in it:
        if a == "--control-fd":
            fd = int(next(it))
        elif a == "--home":
            home = next(it)
        elif a == "--site":
            sites.append(next(it))
        elif a == "--private-tmp":
            private = True
        elif a == "--scratch":
            scratch = {str(k): int(v) for k, v in json.loads(next(it)).items()}
    sys.path[:] = [HERE] + [p for p in sys.path[1:] if p] + sites
    import confine
    import forkcare
    control = socket.socket(fileno=fd)
    control.set_inheritable(False)
    forkcare.prepare(private)
    import torch
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
    import modelserver  # noqa: F401  (with modelwire and modelrecord)
    sys.modules.setdefault("__mtxdiag_server__", __import__("types").ModuleType("__mtxdiag_server__"))
    gc.collect()
    gc.freeze()                     # the forks' collections skip what they share with this worker (zygote.py)
    base = confine.own_state()
    home = os.path.realpath(home)
    return forkcare.serve(control, 2, lambda req, fds, ctl: _fork_run(req, fds, ctl, base, private, scratch, home),
                          base, confine.changes, private, home, CTL)


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))
