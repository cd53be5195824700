"""A module the grader lacks but the assignment allows is the grader's fault with the install command, never
a student's zero (issue 27 item 7); one the assignment does not allow stays the student's missing-module."""
from __future__ import annotations

from pathlib import Path

from harness import allowed
from harness.grading import rubric
from harness.api import check_file
from harness.grading.results import fault_of

LESSON = Path(__file__).resolve().parents[2] / "submissions" / "reversal_lesson.py"
ABSENT = "mtxdiag_absent_pkg_for_tests"        # installed nowhere


def _importing(tmp_path, module) -> Path:
    text = LESSON.read_text().replace("import torch\n", f"import torch\nimport {module}\n", 1)
    assert module in text
    f = tmp_path / "student.py"
    f.write_text(text)
    return f


def test_an_allowed_module_the_grader_lacks_is_a_grader_fault(tmp_path, monkeypatch):
    monkeypatch.setitem(allowed.ALLOWED, "reversal", allowed.ALLOWED["reversal"] + (ABSENT,))
    result = check_file(_importing(tmp_path, ABSENT), assignment="reversal", quick=True)
    top = result["diagnoses"][0]
    assert top["id"] == "grader-fault", result["diagnoses"]
    assert f"pip install {ABSENT}" in top["fix"] and "not at fault" in top["fix"]
    assert result["error"]["student_fault"] is False and fault_of(result) == "grader"
    assert rubric.score(result, rubric.load())["score"] is None          # regraded, never a zero


def test_a_module_the_assignment_does_not_allow_stays_the_students(tmp_path):
    result = check_file(_importing(tmp_path, ABSENT), assignment="reversal", quick=True)
    assert result["diagnoses"][0]["id"] == "missing-module"
    assert fault_of(result) == "student"
