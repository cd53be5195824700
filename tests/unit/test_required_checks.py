"""No silent skip of a required check: each assignment declares the probes a full check must measure
(Assignment.must_measure); one of their checks skipped because the harness could not measure it is listed in the
summary with why and keeps the verdict from `clean` (check-not-measured, below 0.5, on no component, free in the
default rubric); a part that is absent or not implemented, or a probe's own reason by design, is no such gap.

Fed through engine.build_result on recorded child payloads (the goldens of correct code), one check changed."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from harness import engine
from harness.assignments import ALL, assignment_of
from harness.checks import DECLARED, not_measured
from harness.grading import rubric
from harness.outcome import ChildOutcome
from harness.report import html
from harness.report.terminal import summary


@pytest.fixture(autouse=True)
def piped(monkeypatch):
    """The summaries below are read as a pipe gives them (whole lines): a COLUMNS the test runner's process holds
    (pytest-xdist's workers have one) would wrap them."""
    monkeypatch.delenv("COLUMNS", raising=False)

GOLDENS = Path(__file__).resolve().parent / "goldens"
NOT_FOUND = "not trained: run_transformer_lm's model could not be found to train (no module ...)"


def golden(name: str) -> dict:
    return json.loads((GOLDENS / f"{name}.json").read_text())


def build(g: dict, change: dict | None = None, quick: bool = False) -> dict:
    """The parent's result from the golden's payload with the checks in `change` ({id: new fields}) replaced."""
    payload = copy.deepcopy(g["payload"])
    for c in payload["checks"]:
        c.update((change or {}).get(c["id"], {}))
    if quick:
        payload["checks"] = [c for c in payload["checks"] if c["id"] != "lm-training"]
    return engine.build_result(ChildOutcome(payload, g["status"]), g["submission"], g["requested_assignment"],
                               quick=quick)


def skip(detail: str, **data) -> dict:
    return {"status": "skip", "measured": None, "detail": detail, "data": data, "location": None}


@pytest.fixture(scope="module")
def lm():
    return golden("reference__lm_repo")


def test_every_required_probe_is_declared():
    for a in ALL:
        assert a.must_measure, a.name
        assert set(a.must_measure) <= set(DECLARED), a.name


def test_correct_code_stays_clean_with_nothing_unmeasured(lm):
    r = build(lm)
    assert r["verdict"] == "clean" and not_measured(r) == []
    assert "not measured" not in summary(r, color=False, width=100)


def test_a_training_the_harness_could_not_set_up_is_not_clean(lm):
    r = build(lm, {"lm-training": skip(NOT_FOUND, could_not_measure="the model could not be found")})
    assert r["verdict"] == "problems"
    [d] = r["diagnoses"]
    assert d["id"] == "check-not-measured" and d["confidence"] < 0.5 and not d.get("component")
    assert d["evidence"] == [f"lm-training was not measured: {NOT_FOUND}"] and "lm-training" in d["title"]
    text = summary(r, color=False, width=None)
    assert "No problems found" not in text
    assert f"  not measured lm-training: {NOT_FOUND}" in text.splitlines()
    assert "Not measured: <span class=\"mono\">lm-training</span>" in html.render(r)
    # the student is not charged for it
    assert rubric.score(r, rubric.load())["score"] == rubric.load().lm["max_score"]


def test_a_probe_whose_own_code_failed_is_not_clean_for_a_single_file_assignment_either():
    g = golden("reference__reversal")
    crash = skip("could not measure: the check's own code failed (not your code's fault): ...", harness_error=True,
                 could_not_measure="RuntimeError: nested tensor")
    r = build(g, {"overfit": crash})
    assert r["verdict"] == "problems" and [d["id"] for d in r["diagnoses"]] == ["check-not-measured"]
    grade = rubric.score(r, rubric.load())
    assert grade["score"] == grade["max_score"], grade["breakdown"]


@pytest.mark.parametrize("change", [
    {"lm-training": skip("not trained: run_get_batch not defined", kind="absent")},
    {"lm-training": skip("not trained: run_get_batch (the training's batches) raised NotImplementedError: ",
                         kind="not-implemented", could_not_measure="the student's code raised")},
    {"lm-adamw": dict(skip("get_adamw_cls raises NotImplementedError (not implemented yet)", kind="not-implemented"),
                      measured={"status": "not implemented"})},
], ids=["absent", "not-implemented", "training-stub"])
def test_a_part_absent_or_not_implemented_is_no_gap(lm, change):
    r = build(lm, change)
    assert not_measured(r) == [] and "check-not-measured" not in [d["id"] for d in r["diagnoses"]]


def test_the_student_code_raising_there_is_reported_by_the_failing_component_else_it_is_a_gap(lm):
    raised = skip("not trained: your training on the corpus raised RuntimeError: boom", kind="error",
                  could_not_measure="the student's code raised")
    alone = build(lm, {"lm-training": raised})
    assert [d["id"] for d in alone["diagnoses"]] == ["check-not-measured"]     # nothing else says it
    failing = {"status": "error", "measured": {"exception": "RuntimeError"}, "detail": "run_transformer_lm raised "
               "RuntimeError: boom", "data": {"component": "lm", "kind": "error", "message": "RuntimeError: boom"}}
    both = build(lm, {"lm-training": raised, "lm-lm": failing})
    assert "check-not-measured" not in [d["id"] for d in both["diagnoses"]] and both["verdict"] == "problems"
    assert [g["explained"] for g in not_measured(both)] == [True]     # still listed: it was not measured
    assert "  not measured lm-training: " + raised["detail"] in summary(both, color=False, width=None)


def test_a_skip_by_the_probes_design_is_listed_but_leaves_the_verdict():
    g = golden("reference__block")
    r = build(g, {"block-lm": skip("TransformerBlock takes no `causal` argument: a causal language model cannot "
                                   "be built")})
    assert r["verdict"] == "clean" and [(x["id"], x["explained"]) for x in not_measured(r)] == [("block-lm", True)]
    assert "not measured block-lm: TransformerBlock takes no" in summary(r, color=False, width=None)


def test_quick_mode_does_not_run_the_training_by_design(lm):
    r = build(lm, quick=True)
    assert r["verdict"] == "clean" and not_measured(r) == []
    assert "lm-training" in assignment_of("lm").must_measure
