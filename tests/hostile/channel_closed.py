# hostile: closes every file descriptor above 2 (the result channel among them) while loading
# base: reference
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
import os as _os


class _Close:
    _os.closerange(3, 65536)
