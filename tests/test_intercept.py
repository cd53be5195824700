"""The interceptor (harness/intercept.py): what it records, and that a stopped recorder leaves torch as it was."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode, _get_current_function_mode, _len_torch_function_stack

from harness.intercept import Recorder

HERE = __file__


def _loss(x, y):
    return F.cross_entropy(x, y)          # a line of this file: the recorder names it


def test_records_the_watched_call_with_its_line():
    x, y = torch.randn(4, 5), torch.tensor([0, 1, 2, 3])
    with Recorder(HERE, only=("cross_entropy",)) as rec:
        _loss(x, y)
        torch.softmax(x, -1)              # not in `only`: passes through unrecorded
    assert [c.op for c in rec.calls] == ["cross_entropy"]
    assert rec.calls[0].line == _loss.__code__.co_firstlineno + 1


def test_stop_leaves_the_mode_stack_and_records_nothing_more():
    x, y = torch.randn(4, 5), torch.tensor([0, 1, 2, 3])
    depth = _len_torch_function_stack()
    with Recorder(HERE, only=("cross_entropy",)) as rec:
        _loss(x, y)
        assert _get_current_function_mode() is rec
        rec.stop()
        assert _len_torch_function_stack() == depth      # off torch's stack: later calls pay nothing
        _loss(x, y)
        rec.stop()                                        # twice is harmless
    assert _len_torch_function_stack() == depth           # the `with` did not pop anything else
    assert len(rec.calls) == 1


class _Other(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.seen = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen += 1
        return func(*args, **(kwargs or {}))


def test_stop_under_another_mode_only_passes_calls_through():
    """A mode the student entered after the recorder stays on top and keeps working; the recorder, not on top,
    cannot leave the stack, so it stops recording and leaves on its `with` as usual."""
    x, y = torch.randn(4, 5), torch.tensor([0, 1, 2, 3])
    depth = _len_torch_function_stack()
    with Recorder(HERE, only=("cross_entropy",)) as rec:
        with _Other() as other:
            rec.stop()
            assert _get_current_function_mode() is other
            _loss(x, y)
            assert other.seen >= 1
        assert _get_current_function_mode() is rec
    assert _len_torch_function_stack() == depth
    assert rec.calls == []
