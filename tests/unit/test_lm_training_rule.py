"""The parent's reading of the brief lm training (check lm-training): a failure located in a component whose own
check passes is its own diagnosis on that component (symptom and isolation run measured); located in a failing
component, that component's diagnosis explains it; unlocated, it is the measured failure below 0.5."""
from __future__ import annotations

from harness.checks import LM_COMPONENTS
from harness.engine import diagnose


def result(training: dict, failing=()):
    checks = [{"id": f"lm-{c}", "status": "fail" if c in failing else "pass", "measured": {"max_abs": 1.0},
               "expected": "", "detail": "differs", "data": {"component": c, "kind": "mismatch"}, "location": None}
              for c in LM_COMPONENTS]
    checks.append(dict({"id": "lm-training", "measured": {}, "expected": "", "detail": "leaves it at step 2",
                        "location": {"file": "cs336_basics/model.py", "line": 200}}, **training))
    return {"assignment": "lm", "checks": checks, "submission": "repo"}


def test_a_training_only_failure_is_its_own_diagnosis_on_the_located_component():
    out = diagnose(result({"status": "fail", "data": {"component": "adamw", "culprits": ["adamw"]}}))
    assert [(d["id"], d.get("component")) for d in out] == [("training-fails", "adamw")]
    assert out[0]["confidence"] >= 0.8 and out[0]["location"]["line"] == 200


def test_a_failing_component_explains_the_training():
    out = diagnose(result({"status": "fail", "data": {"component": "adamw", "culprits": ["adamw"]}},
                          failing=("adamw",)))
    assert [(d["id"], d.get("component")) for d in out] == [("component-mismatch", "adamw")]
    assert any("lm-training" in e for e in out[0]["evidence"])
    # the model located, the bug upstream of it (rope): rope's diagnosis explains the training
    # (the downstream failures measured to start on a line rope's own failing run executed: folded into rope)
    r = result({"status": "fail", "data": {"component": "lm", "culprits": ["model"]}},
               failing=("rope", "mha-rope", "block", "lm"))
    for c in r["checks"]:
        if c["id"] == "lm-rope":
            c["data"]["lines"] = {"cs336_basics/model.py": [40, 41, 42]}
        elif c["id"] in ("lm-mha-rope", "lm-block", "lm-lm"):
            c["location"] = {"file": "cs336_basics/model.py", "line": 41}
    out = diagnose(r)
    assert [d.get("component") for d in out] == ["rope"] and any("lm-training" in e for e in out[0]["evidence"])


def test_an_unlocated_training_failure_is_the_measurement_only():
    out = diagnose(result({"status": "fail", "data": {"component": None, "culprits": []}}))
    assert len(out) == 1 and out[0]["confidence"] < 0.5 and not out[0].get("component")


def test_a_training_that_could_not_run_is_no_training_diagnosis_but_the_result_is_incomplete():
    """Not measured is not a failure of the student's (no training-fails), nor silent: check-not-measured, below
    0.5 and on no component; when the student's code raised there and a component fails, that one reports it."""
    out = diagnose(result({"status": "skip", "data": {"could_not_measure": "the model could not be found"}}))
    assert [(d["id"], d.get("component")) for d in out] == [("check-not-measured", None)]
    assert out[0]["confidence"] < 0.5 and out[0]["evidence"] == ["lm-training was not measured: leaves it at step 2"]
    raised = {"status": "skip", "data": {"kind": "error", "could_not_measure": "the student's code raised"}}
    assert [d["id"] for d in diagnose(result(raised, failing=("linear",)))] == ["component-mismatch"]
    assert diagnose(result({"status": "pass", "data": {}})) == []
