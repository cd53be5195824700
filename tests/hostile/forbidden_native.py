# hostile: loads native code with ctypes and swaps torch's entry in sys.modules (and puts it back)
# base: reference
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
import ctypes
import sys
import types


class _Native:
    _libc = ctypes.CDLL(None)                                                 # OP ctypes load
    _real = sys.modules["torch"]
    sys.modules["torch"] = types.ModuleType("torch")                          # OP sys.modules load
