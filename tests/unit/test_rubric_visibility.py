"""The rubric's [visibility] table: Gradescope's four values per cause, per lm component, for the overall tests and
the 0-point check tests, with clear errors for what it does not know; applied to every test of results.json
(gradescope_schema passes it), an unset test taking `--visibility`, else the table's default, else visible."""
from __future__ import annotations

import pytest

from harness.checks import LM_COMPONENTS
from harness.grading import gradescope_schema, rubric
from harness.grading.gradescope import gradescope_results
from harness.grading.visibility import fallback

TABLE = """
[visibility]
default = "after_published"
overall = "visible"
checks = "hidden"
[visibility.causes]
causal-mask-missing = "after_due_date"
[visibility.components]
mha_rope = "hidden"
rope = "after_due_date"
"""


def _rubric(extra: str = TABLE) -> rubric.Rubric:
    return rubric.parse(rubric.DEFAULT_PATH.read_text() + extra, "mine.toml")


def _reversal(verdict="problems", causes=("causal-mask-missing", "no-warmup")):
    return {"verdict": verdict, "error": None,
            "diagnoses": [{"id": c, "title": c, "evidence": ["e"], "fix": "f"} for c in causes],
            "checks": [{"id": "causal-leak", "status": "fail", "measured": 0.5, "expected": "0", "detail": ""}]}


def _lm(failing=("rope",)):
    checks = [{"id": f"lm-{c}", "status": "fail" if c in failing else "pass", "measured": None, "expected": "",
               "detail": "", "data": {}, "location": None} for c in LM_COMPONENTS]
    return {"assignment": "lm", "verdict": "problems", "checks": checks,
            "diagnoses": [{"id": "tampering", "title": "tampering", "evidence": ["x"]}]}


def test_the_table_parses_into_its_groups():
    r = _rubric()
    assert r.visibility == {"default": "after_published", "overall": "visible", "checks": "hidden",
                            "causes": {"causal-mask-missing": "after_due_date"},
                            "components": {"mha-rope": "hidden", "rope": "after_due_date"}}
    assert rubric.load().visibility == {}


@pytest.mark.parametrize("extra, message", [
    ('[visibility]\ndefault = "public"\n', "default must be one of visible, hidden, after_due_date, after_published"),
    ('[visibility]\nchecks = true\n', "checks must be one of"),
    ('[visibility]\noveral = "visible"\n', "unknown 'overal'. Did you mean: overall"),
    ('[visibility.causes]\ncausal-mask-mising = "hidden"\n', "unknown 'causal-mask-mising'. Did you mean: "
                                                             "causal-mask-missing"),
    ('[visibility.causes]\nno-warmup = "later"\n', "[visibility.causes] no-warmup must be one of"),
    ('[visibility.components]\nropes = "hidden"\n', "component: unknown 'ropes'"),
    ('[visibility]\ncauses = "hidden"\n', "causes must be a table"),
    ('visibility = "hidden"\n', "[visibility] must be a table"),
])
def test_unknown_values_and_keys_are_errors_that_say_where(extra, message):
    text = "max_score = 10\n" + extra if extra.startswith("visibility =") else rubric.DEFAULT_PATH.read_text() + extra
    with pytest.raises(rubric.RubricError, match="mine.toml") as e:
        rubric.parse(text, "mine.toml")
    assert message in str(e.value)


def test_each_test_of_a_reversal_result_gets_its_visibility():
    r = _rubric()
    res = _reversal()
    out = gradescope_results(res, rubric.score(res, r), visibility=fallback("", r.visibility),
                             visibilities=r.visibility)
    assert gradescope_schema.check(out) == []
    shown = {t["name"].split(" [")[0]: t["visibility"] for t in out["tests"]}
    assert shown == {"causal-mask-missing": "after_due_date", "no-warmup": "after_published",
                     "check: causal-leak": "hidden"}
    assert out["visibility"] == "after_published"
    clean = _reversal("clean", ())
    out = gradescope_results(clean, rubric.score(clean, r), visibility="hidden", visibilities=r.visibility)
    assert [t["visibility"] for t in out["tests"] if "summary" in t["tags"]] == ["visible"]     # overall
    err = dict(_reversal("error", ()), error={"kind": "timeout", "reason": "slow", "student_fault": True})
    out = gradescope_results(err, rubric.score(err, r), visibility="hidden", visibilities=r.visibility)
    assert [t["visibility"] for t in out["tests"] if "error" in t["tags"]] == ["visible"]


def test_each_lm_component_test_gets_its_visibility():
    r = _rubric()
    res = _lm()
    out = gradescope_results(res, rubric.score(res, r), visibility=fallback("", r.visibility),
                             visibilities=r.visibility)
    assert gradescope_schema.check(out) == []
    by = {t["name"].split(" ")[1]: t["visibility"] for t in out["tests"] if "lm-component" in t["tags"]}
    assert by["rope"] == "after_due_date" and by["mha-rope"] == "hidden" and by["linear"] == "after_published"
    assert [t["visibility"] for t in out["tests"] if "cause" in t["tags"]] == ["after_published"]


def test_the_flag_sets_what_the_table_leaves_unset():
    r = _rubric()
    assert fallback("hidden", r.visibility) == "hidden"          # --visibility over the table's default
    assert fallback("", r.visibility) == "after_published"
    assert fallback("", {}) == "visible"
    res = _reversal()
    out = gradescope_results(res, rubric.score(res, r), visibility="hidden", visibilities=r.visibility)
    assert [t["visibility"] for t in out["tests"]] == ["after_due_date", "hidden", "hidden"]
    out = gradescope_results(res, rubric.score(res, rubric.load()))         # no table: as before, all visible
    assert {t["visibility"] for t in out["tests"]} == {"visible"}
