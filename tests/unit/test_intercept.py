"""The interceptor (harness/child/intercept.py): what it records, and that a stopped recorder leaves torch as it was."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode, _get_current_function_mode, _len_torch_function_stack

from harness.child.intercept import LossTap, StepLosses, watch

HERE = __file__


def _loss(x, y):
    return F.cross_entropy(x, y)          # a line of this file: the recorder names it


def test_records_the_watched_call_with_its_line():
    x, y = torch.randn(4, 5), torch.tensor([0, 1, 2, 3])
    with watch(HERE, only=("cross_entropy",)) as rec:
        _loss(x, y)
        torch.softmax(x, -1)              # not in `only`: passes through unrecorded
    assert [c.name for c in rec.ops] == ["cross_entropy"]
    assert rec.ops[0].line == _loss.__code__.co_firstlineno + 1


def test_stop_leaves_the_mode_stack_and_records_nothing_more():
    x, y = torch.randn(4, 5), torch.tensor([0, 1, 2, 3])
    depth = _len_torch_function_stack()
    with watch(HERE, only=("cross_entropy",)) as rec:
        _loss(x, y)
        assert _get_current_function_mode() is rec
        assert rec.stop()
        assert _len_torch_function_stack() == depth      # off torch's stack: later calls pay nothing
        _loss(x, y)
        assert rec.stop()                                 # twice is harmless
    assert _len_torch_function_stack() == depth           # the `with` did not pop anything else
    assert len(rec.ops) == 1


def test_resume_records_again_and_the_with_leaves_as_usual():
    x, y = torch.randn(4, 5), torch.tensor([0, 1, 2, 3])
    depth = _len_torch_function_stack()
    with watch(HERE, only=("cross_entropy",)) as rec:
        _loss(x, y)
        rec.stop()
        _loss(x, y)
        rec.resume()
        assert _get_current_function_mode() is rec
        _loss(x, y)
    assert _len_torch_function_stack() == depth
    assert len(rec.ops) == 2


class _Other(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.seen = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen += 1
        return func(*args, **(kwargs or {}))


def test_stop_under_another_mode_refuses_and_goes_on_recording():
    """A mode the student entered after the recorder stays on top and keeps working; the recorder, not on top,
    cannot leave the stack: it says so and goes on recording, and leaves on its `with` as usual."""
    x, y = torch.randn(4, 5), torch.tensor([0, 1, 2, 3])
    depth = _len_torch_function_stack()
    with watch(HERE, only=("cross_entropy",)) as rec:
        with _Other() as other:
            assert not rec.stop()
            assert _get_current_function_mode() is other
            _loss(x, y)
            assert other.seen >= 1
        assert _get_current_function_mode() is rec
    assert _len_torch_function_stack() == depth
    assert len(rec.ops) == 1


def test_loss_tap_sees_module_and_functional_losses_and_puts_them_back():
    x, y = torch.randn(4, 5), torch.tensor([0, 1, 2, 3])
    orig = (F.cross_entropy, F.nll_loss)
    tap = LossTap()
    tap.on()
    try:
        a = torch.nn.CrossEntropyLoss()(x, y)                  # the module looks F.cross_entropy up per call
        b = F.nll_loss(torch.log_softmax(x, -1), y)
        F.cross_entropy(x, y, reduction="none")               # not a scalar: counted, not a loss value
    finally:
        tap.off()
    assert (F.cross_entropy, F.nll_loss) == orig
    assert tap.calls == 3
    assert [float(v) for v in tap.losses] == [float(a), float(b)]


def test_loss_tap_is_blind_to_a_function_imported_by_name():
    """The case the trace falls back to recording for: the tap reports that it saw nothing."""
    from torch.nn.functional import cross_entropy
    tap = LossTap()
    tap.on()
    try:
        cross_entropy(torch.randn(4, 5), torch.tensor([0, 1, 2, 3]))
    finally:
        tap.off()
    assert tap.calls == 0 and tap.losses == []


def test_loss_tap_leaves_a_replacement_made_since_for_the_guard():
    orig = F.cross_entropy
    tap = LossTap()
    tap.on()

    def theirs(*a, **k):
        return orig(*a, **k)
    F.cross_entropy = theirs
    try:
        tap.off()
        assert F.cross_entropy is theirs
    finally:
        F.cross_entropy = orig


def _loop(loss_fn, steps: int, losses: StepLosses) -> list[float]:
    """A training loop's loss calls, with at_step(k) where an optimizer pre-step hook would call it."""
    want = []
    torch.manual_seed(0)
    try:
        for k in range(1, steps + 1):
            x, y = torch.randn(4, 5), torch.randint(0, 5, (4,))
            want.append(float(loss_fn(x, y)))
            losses.at_step(k)
    finally:
        losses.tap.off()
    return want


def test_step_losses_record_the_first_step_and_tap_the_rest():
    depth = _len_torch_function_stack()
    with watch(HERE, keep_outputs=("cross_entropy",), only=("cross_entropy",)) as rec:
        losses = StepLosses(rec)
        want = _loop(lambda x, y: F.cross_entropy(x, y), 6, losses)
        assert losses.mode == "tap" and _len_torch_function_stack() == depth     # the recorder left after step 1
    assert len(rec.ops) == 1                       # step 1's call, with its arguments, for the rules
    assert losses.values() == want                   # every step's loss, in order
    assert F.cross_entropy.__module__ == "torch.nn.functional" and not hasattr(F.cross_entropy, "_mtxdiag_tap")


def test_step_losses_hand_back_to_the_recorder_when_the_tap_is_blind():
    from torch.nn.functional import cross_entropy     # bound before the tap: it never sees these calls
    with watch(HERE, keep_outputs=("cross_entropy",), only=("cross_entropy",)) as rec:
        losses = StepLosses(rec)
        want = _loop(lambda x, y: cross_entropy(x, y), 6, losses)
        assert losses.mode == "record-all" and _get_current_function_mode() is rec
    assert losses.values() == want[:1] + want[2:]    # step 2's loss fell between the two: the one missing
