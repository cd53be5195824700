# hostile: at load, tries to cripple the process that started it (a warm worker forks every later student from
# it): its memory and descriptor limits, its priority (also for the whole uid), scheduling policy and CPUs,
# and the sandbox's init; prints which attempts the kernel allowed
# base: reference
# flake8: noqa  (a fragment: tests/integration/test_hostile_wave2.py appends it to its base)
import os as _os
import resource as _res


def _cripple():
    pp = _os.getppid()
    tries = {
        "data": lambda: _res.prlimit(pp, _res.RLIMIT_DATA, (64 << 20, 64 << 20)),          # OP prlimit load
        "nofile": lambda: _res.prlimit(pp, _res.RLIMIT_NOFILE, (12, 12)),
        "stack": lambda: _res.prlimit(pp, _res.RLIMIT_STACK, (1 << 16, 1 << 16)),
        "nice": lambda: _os.setpriority(_os.PRIO_PROCESS, pp, 19),
        "nice-uid": lambda: _os.setpriority(_os.PRIO_USER, 0, 19),
        "nice-group": lambda: _os.setpriority(_os.PRIO_PGRP, _os.getpgid(pp), 19),
        "idle": lambda: _os.sched_setscheduler(pp, _os.SCHED_IDLE, _os.sched_param(0)),
        "affinity": lambda: _os.sched_setaffinity(pp, {sorted(_os.sched_getaffinity(0))[0]}),
        "init": lambda: _res.prlimit(1, _res.RLIMIT_NOFILE, (12, 12)),
        "stop": lambda: _os.kill(pp, 0),
    }
    out = []
    for name, fn in tries.items():
        try:
            fn()
            out.append(f"{name}-ALLOWED")
        except (OSError, ValueError):
            out.append(f"{name}-REFUSED")
    print("CRIPPLE", " ".join(out))


class _AtLoad:                 # a class body runs when the file loads
    _cripple()
