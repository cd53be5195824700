# hostile: hides what it does behind decoys: 60 listings of folders that do not exist (distinct attempts of one
# kind, past the record's bound), then a subprocess, a read of the grader's reference solution and a network
# connection. Every kind must still be reported, with its count.
# base: reference
# flake8: noqa  (a fragment: tests/integration/test_hostile_wave4.py appends it to its base)
import os as _os
import socket as _socket
import subprocess as _subprocess
import sys as _sys


def _quiet(fn):
    try:
        fn()
    except Exception:
        pass


def _hide():
    for i in range(60):
        _quiet(lambda: _os.listdir(f"/decoy-{{MARK}}-{i}"))                        # OP list load
    _quiet(lambda: _subprocess.run(["true"]))                                       # OP subprocess load
    _quiet(lambda: open(_sys.modules["reference_model.reversal"].__file__).read())  # OP read load
    _quiet(lambda: _socket.create_connection(("127.0.0.1", 9), timeout=1))          # OP connect load


class _AtLoad:                 # a class body runs when the file loads
    _hide()
