# hostile: rewrites the grader itself - every probe replaced by one that passes, check() forced to "pass"
# base: broken-forward
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
import harness.child.probes as _hp
import harness.child.probes.base as _hb


def _always_pass(id, status, *args, **kwargs):
    return {"id": id, "status": "pass", "measured": None, "expected": "", "detail": "", "data": {},
            "location": None}


class _Patch:
    for _p in _hp.PROBES:
        object.__setattr__(_p, "fn", lambda ctx, _id=_p.id: [_always_pass(_id, "pass")])
    _hb.check = _always_pass
