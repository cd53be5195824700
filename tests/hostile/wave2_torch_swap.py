# hostile: replaces torch.isfinite with another function of torch's own files (torch._refs.isreal: true for
# every real number, NaN included), through a namespace dict and built names that the text scan cannot read
# base: reference
# flake8: noqa  (a fragment: tests/integration/test_hostile_wave2.py appends it to its base)
import sys as _sys

import torch._refs as _refs


class _AtLoad:                 # a class body runs when the file loads
    vars(_sys.modules["tor" + "ch"])["is" + "finite"] = getattr(_refs, "is" + "real")
