"""The one recorder of torch calls (harness/child/recorder.py): whose lines count, which calls, what is kept."""
from __future__ import annotations

import pytest
import torch

from harness.child.recorder import READS, Recorder, walk

HERE = __file__


def _scores(q, k):
    s = q @ k.transpose(-2, -1)           # a line of this file: the recorder names it
    return torch.softmax(s, -1)


def _inner(x):
    return x * 2.0


def _outer(x):
    return _inner(x) + 1.0


def _line(fn, k: int) -> int:
    return fn.__code__.co_firstlineno + k


def test_every_call_from_the_traced_file_with_its_line_and_copied_outputs():
    q, k = torch.randn(2, 3, 4), torch.randn(2, 3, 4)
    with Recorder(HERE, outputs="copies") as rec:
        w = _scores(q, k)
    names = [op.name for op in rec.ops]
    assert "softmax" in names and "transpose" in names
    sm = rec.of("softmax")[0]
    assert sm.line == _line(_scores, 2) and torch.equal(sm.outs[0], w)
    assert sm.outs[0] is not w                                    # a copy: later in-place edits do not reach it
    assert [op.index for op in rec.ops] == list(range(len(rec.ops)))


def test_calls_made_elsewhere_are_not_recorded_unless_unplaced():
    x = torch.randn(3, 4)
    with Recorder("/not/this/file.py", outputs="copies") as rec:
        _scores(x, x)
    assert rec.ops == []
    ops = {torch.softmax: "softmax"}
    with Recorder("/not/this/file.py", ops=ops, unplaced=("softmax",)) as rec:
        _scores(x, x)
    assert [(op.name, op.line) for op in rec.ops] == [("softmax", None)]


def test_an_ops_map_names_and_selects_the_calls_and_only_narrows_it():
    x = torch.randn(3, 4)
    ops = {torch.softmax: "sm", torch.Tensor.matmul: "mm"}     # `a @ b` arrives as Tensor.matmul
    with Recorder(HERE, ops=ops, outputs="given", keep_out=("sm",), inputs="given") as rec:
        w = _scores(x, x)
    assert [op.name for op in rec.ops] == ["mm", "sm"]             # transpose is not in the map
    mm, sm = rec.ops
    assert sm.out is w and mm.out is None                          # outputs kept as given, only for keep_out
    assert mm.args[0] is x and sm.args[1] == -1
    with Recorder(HERE, ops=ops, only=("sm",)) as rec:
        _scores(x, x)
    assert [op.name for op in rec.ops] == ["sm"]


def test_quiet_names_and_zero_dim_outputs():
    x = torch.randn(3, 4)
    with Recorder(HERE, outputs="copies") as rec:
        x.size(), x.sum()
    assert rec.ops == []                                           # size: quiet; sum: a 0-d output
    with Recorder(HERE, outputs="copies", all_tensors=True, quiet=READS | {"sum"}) as rec:
        x.size(), x.sum(), x.mean()
    assert [op.name for op in rec.ops] == ["mean"]


def test_copied_inputs_only_for_the_chosen_ops():
    q = torch.randn(3, 4)
    with Recorder(HERE, outputs="copies", inputs="copies", keep_in={"softmax"}) as rec:
        _scores(q, q)
    sm, mm = rec.of("softmax")[0], rec.ops[1]
    assert len(sm.ins) == 1 and sm.kwargs == {"dim": -1} and sm.ins[0].shape == (3, 3)
    assert mm.ins == []


def test_inputs_by_identity_link_each_op_to_the_ops_that_made_its_inputs():
    x = torch.randn(3, 4)
    with Recorder(HERE, outputs="copies", all_tensors=True, inputs="identity", depth=8) as rec:
        _outer(x)
    mul, add = rec.ops
    assert (mul.name, add.name) in (("__mul__", "__add__"), ("mul", "add"))
    assert mul.made_by == [None] and add.made_by == [mul.index] and mul.consumers == [add.index]
    assert mul.scalars == (2.0,) and rec.producer[add.out_ids[0]] == add.index
    # the stack: the inner function's line first, then the outer's, each frame with its call's token
    assert [f.line for f in mul.stack][:2] == [_line(_inner, 1), _line(_outer, 1)]
    assert mul.stack[1].token == add.stack[0].token                  # the same call of _outer
    assert mul.stack[1].first == _outer.__code__.co_firstlineno


def test_the_first_op_that_raised_is_kept_with_its_inputs():
    a, b = torch.randn(3, 4), torch.randn(5, 6)
    with pytest.raises(RuntimeError):
        with Recorder(HERE, outputs="copies", all_tensors=True, inputs="identity") as rec:
            y = a * 1.0
            y @ b                                                    # shapes do not match
    name, made_by, shapes, stack = rec.failed
    assert name in ("matmul", "__matmul__") and made_by == [0, None] and shapes == [(3, 4), (5, 6)]
    assert stack[0].file == HERE


def test_limit_and_depth():
    x = torch.randn(3, 4)
    with Recorder(HERE, outputs="copies", limit=1, depth=1) as rec:
        _outer(x)
    assert len(rec.ops) == 1 and len(rec.ops[0].stack) == 1


def test_walk_counts_only_the_files_given_and_shows_their_names():
    import sys
    frames = walk({HERE: "shown.py"}, 3, sys._getframe())
    assert frames[0].file == "shown.py" and frames[0].line == sys._getframe().f_lineno - 1
    assert all(f.file == "shown.py" for f in frames)


def test_the_probes_caller_line_is_the_innermost_line_of_the_students_file():
    from types import SimpleNamespace

    from harness.child.probes.base import caller_line
    ctx = SimpleNamespace(source=SimpleNamespace(code_path=HERE))

    def student():
        return caller_line(ctx)
    assert student() == _line(student, 1)
    assert caller_line(SimpleNamespace(source=SimpleNamespace(code_path="/elsewhere.py"))) is None


# -- the frames above the recording's `with`: walked once, the same as each op walking the whole stack --------
def _calls(fn):
    return fn()                           # a frame of this file above the `with` below


def _record_here(x, depth, inputs=None):
    with Recorder(HERE, depth=depth, outputs="copies", inputs=inputs) as rec:
        _outer(x)
    return rec


def _record_in_a_generator(x):
    rec = Recorder(HERE, depth=6, outputs="copies")

    def steps():
        with rec:                          # a generator's frame: resumed from elsewhere, its f_back changes
            yield _outer(x)
            yield _outer(x)
    g = steps()
    next(g)
    _calls(lambda: next(g))
    return rec


@pytest.mark.parametrize("depth", [1, 2, 3, 6])
def test_an_ops_frames_above_the_with_are_those_a_whole_walk_finds(depth):
    x = torch.randn(3)
    rec = _calls(lambda: _record_here(x, depth))
    lam = _line(test_an_ops_frames_above_the_with_are_those_a_whole_walk_finds, 3)     # under its decorator
    want = [_line(_inner, 1), _line(_outer, 1), _line(_record_here, 2), lam, _line(_calls, 1), lam][:depth]
    mul = rec.of("mul")[0]
    assert [f.line for f in mul.stack] == want
    again = _calls(lambda: _record_here(x, depth))               # other frames, another line of this test
    assert [f.line for f in again.of("mul")[0].stack] == [lam + 5 if n == lam else n for n in want]


def _record_through_an_exit_stack(x):
    import contextlib
    rec = Recorder(HERE, depth=6, outputs="copies")
    with contextlib.ExitStack() as views:
        views.enter_context(rec)             # entered from ExitStack's frame, which has returned by the ops
        _outer(x)
        x * 3.0                              # an op of this frame itself, on another line
    return rec


def test_a_recording_entered_through_an_exit_stack_walks_the_whole_stack():
    x = torch.randn(3)
    rec = _calls(lambda: _record_through_an_exit_stack(x))
    lam = _line(test_a_recording_entered_through_an_exit_stack_walks_the_whole_stack, 2)
    want = [_line(_inner, 1), _line(_outer, 1), _line(_record_through_an_exit_stack, 5), lam, _line(_calls, 1), lam]
    assert [f.line for f in rec.of("mul")[0].stack] == want
    assert [f.line for f in rec.of("mul")[1].stack] == [_line(_record_through_an_exit_stack, 6), lam,
                                                        _line(_calls, 1), lam]


def test_identity_recording_keeps_the_frames_above_alive_and_a_generator_walks_its_own_callers():
    x = torch.randn(3)
    rec = _calls(lambda: _record_here(x, 6, inputs="identity"))
    tokens = [f.token for op in rec.ops for f in op.stack]
    assert len(rec.keep) >= len(tokens) and set(tokens) <= {id(f) for f in rec.keep if not isinstance(f, torch.Tensor)}
    gen = _record_in_a_generator(x)
    first, second = gen.of("mul")[0].stack, gen.of("mul")[1].stack
    assert _line(_calls, 1) not in [f.line for f in first]
    assert _line(_calls, 1) in [f.line for f in second]             # resumed from _calls: its frame is found
