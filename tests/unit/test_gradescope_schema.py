"""gradescope_schema: a results.json breaking one rule of Gradescope's documented format is rejected, with the
rule named; what mtxdiag writes (gradescope_results, reversal and lm) passes; student text in an "md" output is
escaped or fenced (md.py, rubric_lm._markdown)."""
from __future__ import annotations

import copy
import json

import pytest

from harness.grading import gradescope_schema as gs
from harness.grading import md, rubric
from harness.grading.gradescope import gradescope_results, json_safe
from harness.grading.rubric_lm import _markdown

GOOD = {"score": 72.5, "execution_time": 13, "output": "Verdict: problems", "output_format": "text",
        "test_output_format": "text", "test_name_format": "text", "visibility": "visible",
        "stdout_visibility": "hidden", "extra_data": {"max_score": 100},
        "tests": [{"name": "softmax over the wrong dim [softmax-wrong-dim]", "score": 0, "max_score": 27.5,
                   "status": "failed", "output": "Evidence: ...", "visibility": "after_due_date", "tags": ["cause"],
                   "number": "1", "output_format": "md", "name_format": "text", "extra_data": {}}],
        "leaderboard": [{"name": "Accuracy", "value": 0.93}, {"name": "Time", "value": 15.1, "order": "asc"}]}


def _with(path: tuple, value, drop: bool = False) -> dict:
    d = copy.deepcopy(GOOD)
    at = d
    for p in path[:-1]:
        at = at[p]
    if drop:
        del at[path[-1]]
    else:
        at[path[-1]] = value
    return d


def test_a_valid_file_has_no_violation_and_max_score_is_read_from_extra_data():
    assert gs.check(GOOD) == [] and gs.violations(json.dumps(GOOD)) == []
    assert gs.max_score(GOOD) == 100 and gs.max_score({"score": 1}) is None
    assert gs.check({"tests": [{"name": "a", "score": 1, "max_score": 1}]}) == []     # score from the tests


BAD = [
    ("unknown top-level key", ("max_score",), 100, "max_score is not a top-level key"),
    ("score a string", ("score",), "72", "score is not a finite number"),
    ("score a bool", ("score",), True, "score is not a finite number"),
    ("execution_time negative", ("execution_time",), -1, "execution_time is not a number"),
    ("output not a string", ("output",), ["a"], "output is not a string"),
    ("output_format unknown", ("output_format",), "markdown", "output_format is 'markdown'"),
    ("test_output_format unknown", ("test_output_format",), "rtf", "test_output_format is 'rtf'"),
    ("test_name_format unknown", ("test_name_format",), "rtf", "test_name_format is 'rtf'"),
    ("visibility unknown", ("visibility",), "public", "visibility is 'public'"),
    ("stdout_visibility unknown", ("stdout_visibility",), "shown", "stdout_visibility is 'shown'"),
    ("extra_data not an object", ("extra_data",), [], "extra_data is not an object"),
    ("tests not a list", ("tests",), {}, "tests is not a list"),
    ("a test not an object", ("tests", 0), "x", "tests[0] is not an object"),
    ("unknown test key", ("tests", 0, "points"), 3, "tests[0].points is not a key"),
    ("test name missing", ("tests", 0, "name"), None, "tests[0].name is missing", True),
    ("test name empty", ("tests", 0, "name"), "", "tests[0].name is missing"),
    ("test score missing", ("tests", 0, "score"), None, "tests[0].score is missing", True),
    ("test max_score a string", ("tests", 0, "max_score"), "27.5", "tests[0].max_score is missing or not"),
    ("test visibility unknown", ("tests", 0, "visibility"), "students", "tests[0].visibility is 'students'"),
    ("test output not a string", ("tests", 0, "output"), 3, "tests[0].output is not a string"),
    ("test status unknown", ("tests", 0, "status"), "error", "tests[0].status is 'error'"),
    ("test number not a string", ("tests", 0, "number"), 1, "tests[0].number is not a string"),
    ("test tags not strings", ("tests", 0, "tags"), [1], "tests[0].tags is not a list of strings"),
    ("test output_format unknown", ("tests", 0, "output_format"), "markdown", "tests[0].output_format"),
    ("test extra_data not an object", ("tests", 0, "extra_data"), "x", "tests[0].extra_data is not an object"),
    ("raw HTML in md output", ("tests", 0, "output"), "**Evidence:** <img src=x onerror=alert(1)>",
     "tests[0].output is Markdown holding raw HTML"),
    ("leaderboard entries without value", ("leaderboard",), [{"name": "a"}], "leaderboard is not a list"),
    ("unpaired surrogate", ("output",), "x\udcff", "results.output: holds an unpaired surrogate"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_each_rule_rejects_a_malformed_file(case):
    _, path, value, message, *drop = case
    found = gs.check(_with(path, value, drop=bool(drop)))
    assert any(message in v for v in found), found


def test_not_an_object_and_no_score_at_all():
    assert gs.check([]) == ["results.json is not a JSON object"]
    assert any("score is missing" in v for v in gs.check({"output": "x"}))


@pytest.mark.parametrize("text", ['{"score": NaN}', '{"score": Infinity}', '{"score": 1', b'{"output": "\xff"}', ""])
def test_what_is_not_strict_json_is_rejected(text):
    assert gs.violations(text)[0].startswith("results.json is not valid JSON")


def test_markdown_code_is_not_html():
    assert not gs.raw_html("`<b>` and\n```text\n<script>\n```\nafter")
    assert not gs.raw_html("a \\<b\\> escaped")
    assert gs.raw_html("```text\nx\n```\n<b>out of the fence</b>")
    assert gs.raw_html("````\n```\n<b>still inside?</b>\n") is False        # an unclosed fence runs to the end


def test_md_helpers_keep_student_text_literal():
    hostile = "x ``` <script>alert(1)</script> **bold** [a](javascript:b)"
    assert not gs.raw_html(md.fence(hostile)) and hostile in md.fence(hostile)
    assert not gs.raw_html(md.inline(hostile)) and "\\*\\*bold\\*\\*" in md.inline(hostile)
    assert md.code("a`b") == "``a`b``" and md.code("") == ""


def test_lm_component_markdown_fences_the_evidence_and_escapes_the_file_name():
    row = {"component": "rope", "adapter": "run_rope", "status": "fail", "why": "fails"}
    comp = {"cause": "rope-halves-not-pairs", "confidence": 0.9,
            "location": {"file": "/x/<img src=x onerror=y>.py", "line": 3},
            "evidence": ["ValueError: </pre><script>steal()</script>", "```` closes?"]}
    text = _markdown(row, comp)
    assert not gs.raw_html(text), text
    assert "</pre><script>steal()</script>" in text                   # shown, verbatim, inside the fence
    assert "**Where:** `<img src=x onerror=y>.py` line 3" in text


def test_what_mtxdiag_writes_passes_for_reversal_and_lm():
    rev = {"assignment": "reversal", "verdict": "problems", "checks": [
        {"id": "loss-decreases", "status": "fail", "measured": float("nan"), "detail": "student says \udcff"}],
        "diagnoses": [{"id": "softmax-wrong-dim", "title": "softmax dim", "evidence": ["e"], "fix": "f",
                       "location": {"file": "m.py", "line": 4}}]}
    out = gradescope_results(rev, rubric.score(rev, rubric.load()), execution_time=3.2)
    assert gs.check(out) == [] and gs.violations(json.dumps(out, allow_nan=False)) == []
    assert gs.max_score(out) == rubric.load().max_score
    lm = {"assignment": "lm", "verdict": "problems", "checks": [
        {"id": "lm-rope", "status": "fail", "data": {}}, {"id": "lm-softmax", "status": "pass", "data": {}}],
        "diagnoses": [{"id": "rope-halves-not-pairs", "component": "rope", "title": "RoPE", "confidence": 0.9,
                       "evidence": ["<b>student</b>"], "location": {"file": "model.py", "line": 9}}]}
    out = gradescope_results(lm, rubric.score(lm, rubric.load()))
    assert gs.check(out) == [] and "max_score" not in out and gs.max_score(out) == 100


def test_json_safe_replaces_what_strict_json_cannot_hold():
    assert json_safe({"a": ["x\udcff", float("inf"), 2.0, (1,)]}) == {"a": ["x\ufffd", None, 2.0, [1]]}
