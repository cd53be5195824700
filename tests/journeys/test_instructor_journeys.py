"""An instructor's journeys from the installed wheel: a class graded, a Gradescope zip built and run locally
before it is uploaded (see conftest.py)."""
from __future__ import annotations

import csv
import json

import pytest

from harness.grading import gradescope_schema

from journey import copy_example, mutant_file, assert_html_readable, assert_readable


@pytest.fixture(scope="module")
def a_class(user, tmp_path_factory):
    """A mixed class: a correct file, a notebook, a buggy file, one that does not parse, and a repository."""
    d = tmp_path_factory.mktemp("class")
    sub = d / "submissions"
    sub.mkdir()
    copy_example("reversal_lesson.py", sub / "ada.py")
    copy_example("reversal_lesson.ipynb", sub / "grace.ipynb")
    r = user.run("mutants", "export", d / "m", "--assignment", "reversal", cwd=d)
    assert r.returncode == 0, r.stderr
    (sub / "alan.py").write_text(mutant_file(d / "m", "reversal-missing-sqrt-dk").read_text())
    (sub / "edsger.py").write_text((sub / "ada.py").read_text().replace("class MultiHeadAttention", "class (", 1))
    return d


def test_an_instructor_grades_a_mixed_class(user, a_class):
    r = user.run("grade", "submissions", "--out", "grades", "--jobs", "2", cwd=a_class, timeout=1200)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    assert_readable(r.stdout + r.stderr, "grade: terminal")
    out = a_class / "grades"
    rows = {row["student"]: row for row in csv.DictReader((out / "grades.csv").open())}
    assert len(rows) == 4, rows
    assert set(rows) == {"ada", "grace", "alan", "edsger"}, rows
    by = {k: float(v["score"] or 0) for k, v in rows.items()}
    assert by["ada"] == by["grace"] == float(rows["ada"]["max_score"]) > by["alan"] > by["edsger"] == 0, by
    assert_html_readable((out / "index.html").read_text(), "gradebook")
    # a rerun is resumable: nothing to grade again, the same grades
    again = user.run("grade", "submissions", "--out", "grades", "--jobs", "2", cwd=a_class, timeout=600)
    assert again.returncode == 0 and (out / "grades.csv").read_text().count("\n") == len(rows) + 1


SUBMISSIONS = {"reversal": ("reversal_lesson.py", "submission.py"), "block": ("block_lesson.py", "submission.py"),
               "lm": ("lm_example", "repo")}


@pytest.mark.slow
@pytest.mark.parametrize("assignment", sorted(SUBMISSIONS))
def test_a_gradescope_zip_built_from_the_install_runs_locally(user, tmp_path, assignment):
    r = user.run("gradescope", "build", "--assignment", assignment, "--out", "autograder.zip", "--quick",
                 cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    example, name = SUBMISSIONS[assignment]
    sub = tmp_path / "submission"
    sub.mkdir()
    copy_example(example, sub / name)
    run = user.run("gradescope", "run", "autograder.zip", "submission", "--keep", "stand-in", cwd=tmp_path,
                   timeout=1800)
    assert run.returncode == 0, (run.stdout[-4000:], run.stderr[-4000:])
    raw = (tmp_path / "stand-in" / "results" / "results.json").read_bytes()
    assert gradescope_schema.violations(raw) == [] and "results.json: valid" in run.stdout
    results = json.loads(raw)
    assert results["score"] == gradescope_schema.max_score(results) > 0, results.get("output")
    assert_readable(run.stdout, f"gradescope run {assignment}")
