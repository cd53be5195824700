# hostile: a correct model that installs a trace function from forward(): it is handed every frame the grader
# runs afterwards (its result, its channel), the way sys._getframe would be
# base: reference
# flake8: noqa  (a fragment: tests/integration/test_hostile_wave4.py appends it to its base)
import sys as _sys

_seen = []


def _tracer(frame, event, arg):
    if len(_seen) < 5:
        _seen.append(frame.f_code.co_filename)
    return None


class MiniTransformer(MiniTransformer):
    def forward(self, src, tgt):
        _sys.settrace(_tracer)                                                         # OP settrace forward
        return super().forward(src, tgt)
