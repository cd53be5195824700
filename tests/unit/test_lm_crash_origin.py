"""A crash located where the bad value was made (issue 25, item 5): the recorder keeps the op that raised and
its operands' producers; crash_origin names the student's line that made the wrongly shaped operand, the
raising line as context. In-process, on a small file written here."""
from __future__ import annotations

import importlib
import sys

import torch

from harness.child.probes.lm import divergence as div
from harness.child.probes.lm.where import crash_origin

SOURCE = '''import torch


def rotate(x, positions):
    angles = positions.float().view(-1, 1, 1)   # (seq, 1, 1): seq lands on the batch axis
    cos = torch.cos(angles * 0.5)
    return x * cos
'''


def _run(tmp_path, name, source, *args):
    (tmp_path / f"{name}.py").write_text(source)
    sys.path.insert(0, str(tmp_path))
    try:
        mod = importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))
    rec, out = div.record({str(tmp_path / f"{name}.py"): f"{name}.py"}, mod.rotate, args)
    return rec, out


def test_a_broadcast_crash_is_located_at_the_reshape_that_made_the_operand(tmp_path):
    rec, out = _run(tmp_path, "crash_rope_a", SOURCE, torch.randn(4, 12, 8), torch.arange(12))
    assert out is None and rec.failed is not None
    found = crash_origin(rec.failed, rec.ops)
    assert found["file"] == "crash_rope_a.py" and found["line"] == 5     # the view that shaped the angles
    assert found["raised_at"]["line"] == 7 and found["shape"] == [12, 1, 1]


def test_no_origin_when_the_run_does_not_raise(tmp_path):
    rec, out = _run(tmp_path, "crash_rope_b", SOURCE, torch.randn(12, 1, 8), torch.arange(12))
    assert out is not None and rec.failed is None and crash_origin(rec.failed, rec.ops) is None


def test_no_origin_when_both_operands_are_the_course_inputs(tmp_path):
    src = "def rotate(x, positions):\n    return x * positions\n"
    rec, out = _run(tmp_path, "crash_rope_c", src, torch.randn(4, 12, 8), torch.randn(5))
    assert rec.failed is not None and crash_origin(rec.failed, rec.ops) is None


def test_no_origin_when_the_operand_was_only_copied(tmp_path):
    # x @ w without the transpose: the weight was cast, not shaped; the matmul's own line stays the location
    src = "import torch\n\n\ndef rotate(x, w):\n    w = w.to(torch.float32)\n    return x @ w\n"
    rec, out = _run(tmp_path, "crash_rope_d", src, torch.randn(2, 5, 16), torch.randn(24, 16))
    assert rec.failed is not None and crash_origin(rec.failed, rec.ops) is None
