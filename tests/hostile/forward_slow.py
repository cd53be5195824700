# hostile: a forward() that takes 10 s per call
# base: reference
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
import time as _time


class MiniTransformer(MiniTransformer):
    def forward(self, src, tgt):
        _time.sleep(10)
        return super().forward(src, tgt)
