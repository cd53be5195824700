# hostile: makes a function whose frames claim to be the grader's (its code object's co_filename replaced by a
# harness file), so that what it does looks like the grader's own operation, then reads the reference solution
# through it
# base: reference
# flake8: noqa  (a fragment: tests/integration/test_hostile_wave4.py appends it to its base)
import os as _os
import sys as _sys


def _read(path):
    with open(path) as f:
        return f.read()


class _AtLoad:                 # a class body runs when the file loads
    _ref = _sys.modules["reference_model.reversal"].__file__
    _fake = _os.path.join(_os.path.dirname(_os.path.dirname(_ref)), "harness", "child", "probes", "base.py")
    _read.__code__ = _read.__code__.replace(co_filename=_fake)                        # OP code load
    try:
        print("FORGED-READ", len(_read(_ref)))
    except Exception as e:
        print("FORGED-READ-FAILED", type(e).__name__)
