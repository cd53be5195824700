# probe (not hostile): looks everywhere the previous student in the same worker may have planted a file
# base: reference
# flake8: noqa  (a fragment: tests/integration/test_hostile_wave2.py appends it to its base)
import os as _os


def _look():
    seen = []
    for top in ("/", "/etc", "/opt", "/root", "/var", "/dev", "/dev/shm", "/tmp", "/var/tmp", "/usr"):
        if _os.path.lexists(_os.path.join(top, "planted-{{MARK}}")):
            seen.append(top)
    print("FOUND-PLANTED", " ".join(seen) or "nothing")


class _AtLoad:                 # a class body runs when the file loads
    _look()
