# hostile: os._exit(0) while loading (no exception, no cleanup: the process just ends)
# base: reference
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
import os as _os


class _Quit:
    _os._exit(0)
