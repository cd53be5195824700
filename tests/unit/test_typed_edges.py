"""The edges the type checker pointed at (pyproject's [tool.mypy]), held by behaviour: a declaration that
cannot be compared is refused when it is made, a deduction of "all" is the whole mark, a malformed result
still renders, a submission without a file never reaches a job."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness import checks
from harness.grading import rubric
from harness.checks import BY_ID, Bound, spread
from harness.grading.discovery import Submission
from harness.grading.results import display_path
from harness.report import html
from harness.report.text import as_dict


def test_an_empty_bound_is_refused_when_declared():
    with pytest.raises(ValueError, match="lo, hi or both"):
        Bound()
    assert Bound(lo=1.0).ok(2.0) and not Bound(hi=1.0).ok(2.0)


def test_the_spread_of_correct_code_is_read_as_declared_or_refused():
    assert spread("attn-saturation") is BY_ID["attn-saturation"].correct
    without = next(c.id for c in BY_ID.values() if c.correct is None)
    with pytest.raises(TypeError, match="declares no spread"):
        spread(without)
    with pytest.raises(TypeError, match="no numeric threshold"):
        checks.bound(next(c.id for c in BY_ID.values() if c.bound is None))


def test_a_default_deduction_of_all_takes_the_whole_mark():
    r = rubric.parse('max_score = 10\ndefault_deduction = "all"\n')
    assert r.default_deduction == "all"
    one = {"verdict": "problems", "diagnoses": [{"id": "no-warmup", "title": "t"}], "checks": []}
    assert rubric.score(one, r)["score"] == 0
    with pytest.raises(rubric.RubricError, match='max_score must be a number, not'):
        rubric.parse('max_score = "all"\n')     # "all" is a deduction, never a mark


def test_a_check_with_a_status_that_is_not_a_string_is_listed_as_info():
    rows = html.check_rows({"checks": [{"id": "overfit", "status": ["fail"]}, {"id": ["x"], "status": "pass"}]})
    assert [r["status"] for r in rows] == ["info", "pass"]
    assert rows[0]["section"] == "overfit" and rows[1]["section"] is None


def test_parts_of_a_result_of_the_wrong_shape_read_as_empty():
    assert as_dict([1]) == {} and as_dict(None) == {}
    d = {"a": 1}
    assert as_dict(d) is d


def test_a_submission_without_a_file_has_no_display_path():
    sub = Submission("ada", None, problem="no .py file")
    with pytest.raises(ValueError, match="ada has nothing to grade: no .py file"):
        display_path(sub)
    assert display_path(Submission("ada", Path("/x/ada/src/model.py"))) == "src/model.py"
