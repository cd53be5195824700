"""data locates a wrong target at the statement that writes the target's body, found by what make_batch returns
(src, tgt) and the names written into src, whatever the variables are called: `tgt[b, 1:n + 1] = digits` was
located at the def line before (the rule looked for 'seq' or 'flip' in the text)."""
from __future__ import annotations

from pathlib import Path

from harness.child.loader import load, read_source
from harness.child.probes import data
from harness.child.probes.base import Context

ROOT = Path(__file__).resolve().parents[2]


def test_unflipped_body_write_is_the_line():
    path = ROOT / "tests" / "corpus" / "reversal" / "bugs" / "blog_batch_not_reversed.py"
    src = read_source(str(path), path.read_bytes())
    c = data.make_batch(Context(load(src), src, "reversal", seed=0))[0]
    assert c["status"] == "fail"
    assert c["location"]["line"] == path.read_text().splitlines().index("        tgt[b, 1:n + 1] = digits") + 1


def test_the_correct_file_passes():
    path = ROOT / "tests" / "corpus" / "reversal" / "correct" / "scratch_blog_style.py"
    src = read_source(str(path), path.read_bytes())
    c = data.make_batch(Context(load(src), src, "reversal", seed=0))[0]
    assert c["status"] == "pass" and c["location"] is None


def test_a_vectorised_reversal_is_located_at_the_index_that_orders_it():
    """tgt[:, 1:-1] = rev <- rev = where(real, rev, PAD) <- rev = gather(digits, 1, rev_idx) <- rev_idx: the
    index statement is where the order is chosen (was the def line)."""
    path = ROOT / "tests" / "corpus" / "reversal" / "bugs" / "vectorised_batch_not_reversed.py"
    src = read_source(str(path), path.read_bytes())
    c = data.make_batch(Context(load(src), src, "reversal", seed=0))[0]
    assert c["status"] == "fail"
    want = "    rev_idx = idx.clamp(max=digits.size(1) - 1)"
    assert c["location"]["line"] == path.read_text().splitlines().index(want) + 1
