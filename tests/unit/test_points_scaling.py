"""`--points N` / the rubric's `total = N`: every grade out of N, each test's score and max_score in proportion,
rounded to hundredths with the largest lm component absorbing the rounding so the maxima sum to exactly N and
full marks are exactly N; the flag overrides the rubric's total."""
from __future__ import annotations

import math

import pytest
from click.testing import CliRunner

from harness.checks import LM_COMPONENTS
from harness.cli.main import main
from harness.grading import gradescope_schema, rubric
from harness.grading.gradescope import gradescope_results
from harness.grading.points import scale


def _lm(failing=(), interface=()):
    checks = [{"id": f"lm-{c}", "status": "fail" if c in failing + interface else "pass", "measured": None,
               "expected": "", "detail": "", "data": {}, "location": None} for c in LM_COMPONENTS]
    diags = [{"id": "interface-mismatch", "component": c, "title": "interface", "evidence": []} for c in interface]
    return {"assignment": "lm", "verdict": "problems" if failing or interface else "clean", "checks": checks,
            "diagnoses": diags}


def _reversal(causes=()):
    return {"verdict": "problems" if causes else "clean", "error": None, "checks": [],
            "diagnoses": [{"id": c, "title": c, "evidence": [], "fix": ""} for c in causes]}


def _sum(xs) -> float:
    return math.fsum(xs)


@pytest.mark.parametrize("total", [50, 7, 33.33, 1, 250])
def test_lm_components_sum_to_exactly_n_and_full_marks_score_n(total):
    r = rubric.with_points(rubric.load(), total)
    g = rubric.score(_lm(), r)
    assert g["score"] == g["max_score"] == total
    assert round(_sum(c["max_points"] for c in g["components"]), 6) == total
    out = gradescope_results(_lm(), g)
    assert gradescope_schema.check(out) == [] and gradescope_schema.max_score(out) == total
    assert round(_sum(t["max_score"] for t in out["tests"]), 6) == total == out["score"]
    assert all(abs(t["max_score"] * 100 - round(t["max_score"] * 100)) < 1e-9 for t in out["tests"])  # hundredths


def test_rounding_goes_to_the_largest_component_and_partial_credit_scales():
    full = rubric.score(_lm(), rubric.load())
    g = scale(full, 33.33)
    by = {c["component"]: c["max_points"] for c in g["components"]}
    plain = {c["component"]: round(c["max_points"] * 33.33 / 100, 2) for c in full["components"]}
    assert round(_sum(plain.values()), 2) == 33.32                        # rounding alone loses a hundredth
    moved = {c: (plain[c], by[c]) for c in by if by[c] != plain[c]}
    assert moved == {"rope": (3.33, 3.34)}          # rope and mha have 10 each: the first in build order takes it
    assert round(_sum(by.values()), 6) == 33.33
    one = rubric.score(_lm(failing=("rope",), interface=("adamw",)), rubric.with_points(rubric.load(), 50))
    rope = next(c for c in one["components"] if c["component"] == "rope")
    adamw = next(c for c in one["components"] if c["component"] == "adamw")
    assert rope["points"] == 0 and rope["max_points"] == 5 and adamw["points"] == 1.5 and adamw["max_points"] == 3
    assert one["score"] == round(_sum(c["points"] for c in one["components"]), 2) == 50 - 5 - 1.5
    assert {b["id"]: b["points"] for b in one["breakdown"]} == {"rope": -5, "adamw": -1.5}


def test_reversal_deductions_and_score_scale_in_proportion():
    r = rubric.with_points(rubric.load(), 50)
    g = rubric.score(_reversal(["causal-mask-missing", "no-warmup"]), r)      # 30 and 5 of 100
    assert g["max_score"] == 50 and g["score"] == 32.5
    assert [b["points"] for b in g["breakdown"]] == [-15, -2.5]
    clean = gradescope_results(_reversal(), rubric.score(_reversal(), r))
    assert clean["score"] == 50 and [t["max_score"] for t in clean["tests"]] == [50]
    third = rubric.score(_reversal(["no-warmup"]), rubric.with_points(rubric.load(), 10 / 3))
    assert third["max_score"] == 3.33 and third["score"] == 3.16
    err = {"verdict": "error", "checks": [], "diagnoses": [],
           "error": {"kind": "timeout", "reason": "slow", "student_fault": True}}
    assert rubric.score(err, r)["score"] == 0 and rubric.score(err, r)["max_score"] == 50
    fault = dict(err, error={"kind": "grader-fault", "reason": "x", "student_fault": False})
    assert rubric.score(fault, r)["score"] is None and rubric.score(fault, r)["max_score"] == 50


def test_the_rubrics_total_and_the_flag_that_overrides_it():
    text = "total = 20\n" + rubric.DEFAULT_PATH.read_text()
    r = rubric.parse(text, "mine.toml")
    assert r.total == 20 and rubric.score(_reversal(), r)["score"] == 20
    over = rubric.with_points(r, 40)
    assert over.total == 40 and over.digest != r.digest and rubric.with_points(r, None) is r
    assert rubric.score(_lm(), over)["max_score"] == 40
    for bad in ("total = 0", "total = -3", 'total = "all"', "total = nan"):
        with pytest.raises(rubric.RubricError, match="mine.toml: total must be a number of points > 0"):
            rubric.parse(bad + "\nmax_score = 10\n", "mine.toml")
    with pytest.raises(rubric.RubricError, match="--points"):
        rubric.with_points(r, float("inf"))


def test_points_is_a_flag_of_build_and_grade(tmp_path):
    res = CliRunner().invoke(main, ["gradescope", "build", "--assignment", "reversal", "--out",
                                    str(tmp_path / "a.zip"), "--points", "0"])
    assert res.exit_code == 2 and "--points" in res.output and not (tmp_path / "a.zip").exists()
    res = CliRunner().invoke(main, ["grade", "--help"])
    assert "--points N" in res.output
