# hostile: sys.exit(0) inside forward()
# base: reference
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
import sys as _sys


class MiniTransformer(MiniTransformer):
    def forward(self, src, tgt):
        _sys.exit(0)
