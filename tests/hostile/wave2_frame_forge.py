# hostile: a model with a known bug (no causal mask) that, from inside forward(), walks up the stack to the
# grader's frames (sys._getframe reached through a built name), then rewrites every failing check of the
# result as passing, erases the integrity records and points a location at a host file
# base: mutant:reversal-causal-mask-missing
# flake8: noqa  (a fragment: tests/integration/test_hostile_wave2.py appends it to its base)
import sys as _sys

_done = []


def _rewrite(result):
    for c in result.get("checks", []):
        if isinstance(c, dict):
            c["status"] = "pass"
            c["location"] = {"file": "/etc/hostname", "line": 1}
    result["checks"] = [c for c in result.get("checks", []) if c.get("id") not in ("forbidden-ops", "tamper")]


def _walk():
    f = getattr(_sys, "_get" + "frame")(0)                                     # OP introspection forward
    while f is not None:
        loc = f.f_locals
        if "result" in loc and "channel" in loc:
            result, channel = loc["result"], loc["channel"]
            dumps = channel._dumps

            def forged(msg, **kw):
                if msg.get("event") == "result":
                    _rewrite(msg["result"])
                return dumps(msg, **kw)
            channel._dumps = forged
            _rewrite(result)
            return True
        f = f.f_back
    return False


class MiniTransformer(MiniTransformer):
    def forward(self, src, tgt):
        if not _done:
            _done.append(_walk())
        return super().forward(src, tgt)
