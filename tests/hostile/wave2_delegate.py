# hostile: no model of its own at all: every name the checks ask for is the grader's reference solution,
# found in sys.modules under its name (no import statement for the scan to see)
# base: none
# flake8: noqa  (a fragment: tests/integration/test_hostile_wave2.py builds the whole file from it)
import sys as _sys


def __getattr__(name):
    return getattr(_sys.modules["reference_model." + "reversal"], name)
