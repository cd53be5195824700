# hostile: walks up to the grader's frames from forward() and swells the result it is about to send to ~50 MB
# (artifacts the validation would keep: lists of 5,000 strings of 4,000 characters), to slow the trusted process
# that reads and writes it
# base: reference
# flake8: noqa  (a fragment: tests/integration/test_hostile_wave4.py appends it to its base)
import sys as _sys

_done = []


def _swell(result):
    arts = result.setdefault("artifacts", {})
    for k in range(3):
        arts[f"pad{k}"] = ["x" * 4000] * 4500


def _walk():
    f = getattr(_sys, "_get" + "frame")(0)                                     # OP introspection forward
    while f is not None:
        loc = f.f_locals
        if "result" in loc and "send" in loc:
            channel = loc["send"].__self__
            dumps = channel._dumps

            def swollen(msg, **kw):
                if msg.get("event") == "result":
                    _swell(msg["result"])
                return dumps(msg, **kw)
            channel._dumps = swollen
            return True
        f = f.f_back
    return False


class MiniTransformer(MiniTransformer):
    def forward(self, src, tgt):
        if not _done:
            _done.append(_walk())
        return super().forward(src, tgt)
