# hostile: holds memory outside its address space (files in the sandbox's /dev/shm and /tmp) and fills its
# own folder on disk, far beyond what the memory limit allows; prints how far each got
# base: reference
# flake8: noqa  (a fragment: tests/integration/test_hostile_wave2.py appends it to its base)
import os as _os


def _fill(path, mb):
    done = 0
    try:
        with open(path, "wb") as f:
            for _ in range(mb):
                f.write(b"\1" * (1 << 20))
                f.flush()
                done += 1
    except OSError:
        pass
    finally:
        try:
            _os.unlink(path)
        except OSError:
            pass
    return done


class _AtLoad:                 # a class body runs when the file loads
    print("FILLED", "shm", _fill("/dev/shm/fill", 1200), "tmp", _fill("/tmp/fill", 1200))
