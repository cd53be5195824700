"""harness/readable.py: a shortened text ends at a word's end and says it was shortened (issue: "(nothing correc")."""
from __future__ import annotations

import pytest

from harness.readable import MARK, cut
from harness.report import terminal
from harness.report.text import fmt_value, trunc


def test_a_text_that_fits_is_whole():
    assert cut("nothing correct", 15) == "nothing correct"
    assert cut(None, 5) == ""
    assert cut(12345, 5) == "12345"


def test_a_cut_ends_at_a_word_and_is_marked():
    assert cut("nothing correct here", 14) == "nothing" + MARK
    assert cut("ImportError: No module named 'x'", 12) == "ImportError" + MARK
    assert cut("the mask, then the rest", 12) == "the mask" + MARK        # no dangling comma before the mark


@pytest.mark.parametrize("limit", range(1, 60))
def test_a_cut_never_exceeds_its_limit_and_never_splits_a_word_unmarked(limit):
    text = "RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x64 and 32x64) in forward"
    got = cut(text, limit)
    assert len(got) <= limit
    if len(text) > limit:
        assert got.endswith(MARK)
        head = got[:-len(MARK)]
        assert text.startswith(head)
        long_word = " " not in head and len(head) < len("RuntimeError")     # cut inside the first (long) word
        assert long_word or not text[len(head)].isalnum(), (limit, got)


def test_a_long_word_is_cut_inside_but_marked():
    path = "/tmp/" + "a" * 100
    got = cut(path, 20)
    assert len(got) == 20 and got.endswith(MARK) and path.startswith(got[:-1])


def test_the_report_helpers_cut_at_words():
    text = "the forward pass raised ImportError while importing the student's helpers"
    assert fmt_value(text, 40) == "the forward pass raised ImportError" + MARK
    assert trunc(text, 30) == "the forward pass raised" + MARK
    assert terminal._short(text, 30) == "the forward pass raised" + MARK
    assert fmt_value(float("nan")) == "not a number"


def test_a_number_never_reads_nan():
    from harness.readable import NOT_A_NUMBER, num
    assert num(float("nan"), ".2f") == NOT_A_NUMBER
    assert num(float("-inf")) == "-inf" and num(0.4531, ".2f") == "0.45" and num(3) == "3"
    assert num(None) == "—"


def test_a_measured_value_never_reads_none_or_nan():
    from harness.causes.base import say
    from harness.readable import plain
    assert plain({"upper_max": None, "rows": [0.5, float("nan")], "kind": "mixed", "ok": True}) == \
        "{'upper_max': —, 'rows': [0.5, not a number], 'kind': 'mixed', 'ok': True}"
    assert plain((1,)) == "(1,)"
    assert say({"id": "x", "measured": None, "expected": "0"}) == "x: measured —, expected 0"
    assert say({"id": "x", "measured": float("nan")}) == "x: measured not a number"
    assert say({"id": "x", "measured": {"a": 1, "b": "c"}}) == "x: measured {'a': 1, 'b': 'c'}"     # as before
