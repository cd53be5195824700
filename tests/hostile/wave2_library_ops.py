# hostile: does through libraries what it may not do itself: reads the grader's reference solution with
# numpy.loadtxt and prints it, runs a shell command through torch.utils.collect_env.run, and calls native
# code through the ctypes already loaded in sys.modules
# base: reference
# flake8: noqa  (a fragment: tests/integration/test_hostile_wave2.py appends it to its base)
import sys as _sys

import numpy as _np


def _through_libraries():
    ref = _sys.modules["reference_model.reversal"].__file__
    try:
        lines = _np.loadtxt(ref, dtype=str, delimiter="\x01", comments=None)             # OP read load
        print("REFERENCE-SOURCE", " | ".join(lines[:3]))
    except Exception as e:
        print("LOADTXT-FAILED", type(e).__name__)
    try:
        from torch.utils import collect_env
        print("SHELL", collect_env.run("echo SHELL-RAN-{{MARK}}"))                   # OP subprocess load
    except Exception as e:
        print("SHELL-FAILED", type(e).__name__)
    try:
        api = _sys.modules["ctypes"].pythonapi
        print("NATIVE", api.Py_GetRecursionLimit())                                     # OP ctypes load
    except Exception as e:
        print("NATIVE-FAILED", type(e).__name__)


class _AtLoad:                 # a class body runs when the file loads
    _through_libraries()
