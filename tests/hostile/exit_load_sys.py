# hostile: sys.exit(0) while loading
# base: reference
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
import sys as _sys


class _Quit:
    _sys.exit(0)
