# hostile: replaces builtins the checks use (isinstance, float, len, hasattr)
# base: broken-forward
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
import builtins as _b


class _Patch:
    _b.isinstance = lambda obj, cls: True
    _b.float = lambda *a: 0.0
    _b.len = lambda obj: 0
    _b.hasattr = lambda obj, name: True
