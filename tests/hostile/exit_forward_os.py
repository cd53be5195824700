# hostile: os._exit(0) inside forward()
# base: reference
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
import os as _os


class MiniTransformer(MiniTransformer):
    def forward(self, src, tgt):
        _os._exit(0)
