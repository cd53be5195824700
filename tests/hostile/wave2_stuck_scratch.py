# hostile: leaves files in the sandbox's shared scratch places that the worker cannot simply delete (folders
# without permissions) and writes into every place it can reach, for the next student in the worker to find
# base: reference
# flake8: noqa  (a fragment: tests/integration/test_hostile_wave2.py appends it to its base)
import os as _os


def _plant():
    out = []
    for top in ("/", "/etc", "/opt", "/root", "/var", "/dev", "/dev/shm", "/tmp", "/var/tmp", "/usr"):
        try:
            d = _os.path.join(top, "planted-{{MARK}}")
            _os.makedirs(d, exist_ok=True)
            with open(_os.path.join(d, "note.txt"), "w") as f:
                f.write("planted by the student before you\n")
            _os.chmod(d, 0)
            out.append(f"{top}:PLANTED")
        except OSError:
            out.append(f"{top}:REFUSED")
    print("PLANT", " ".join(out))


class _AtLoad:                 # a class body runs when the file loads
    _plant()
