# hostile: replaces what torch itself wraps (Optimizer.step, torch.manual_seed) with its own functools.wraps
# wrappers, the way an LR scheduler or dynamo would - but from the student's file, so it is the student's doing
# base: reference
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
import functools as _ft


def _wrap(fn):
    @_ft.wraps(fn)
    def wrapper(*args, **kwargs):
        return None                      # never steps, never seeds
    return wrapper


class _Patch:
    torch.optim.Adam.step = _wrap(torch.optim.Adam.step)
    torch.manual_seed = _wrap(torch.manual_seed)
