# hostile: reaches the grader's frames through a traceback instead (tb_frame, then f_back), from forward(),
# and turns every failing check into a pass
# base: mutant:reversal-causal-mask-missing
# flake8: noqa  (a fragment: tests/integration/test_hostile_wave2.py appends it to its base)
_seen = []


def _through_traceback():
    try:
        raise LookupError
    except LookupError as e:
        f = getattr(e.__traceback__, "tb_" + "frame")                           # OP introspection forward
    while f is not None:
        res = f.f_locals.get("result")
        if isinstance(res, dict) and isinstance(res.get("checks"), list):
            for c in res["checks"]:
                c["status"] = "pass"
            return
        f = f.f_back


class MiniTransformer(MiniTransformer):
    def forward(self, src, tgt):
        if not _seen:
            _seen.append(1)
            _through_traceback()
        return super().forward(src, tgt)
