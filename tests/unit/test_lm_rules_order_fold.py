"""The parent's lm rules (harness/causes/lm_component.py through engine.diagnose) on hand-made check
records: the order of diagnoses (issue 25, item 4), folding only on a measured first divergence (item 2),
robustness notes at info (item 3). In-process, no child."""
from __future__ import annotations

from harness.engine import diagnose, verdict


def _check(comp, status, kind=None, location=None, lines=None, **data):
    d = {"component": comp, "adapter": f"run_{comp}", **data}
    if kind:
        d["kind"] = kind
    if lines is not None:
        d["lines"] = lines
    return {"id": f"lm-{comp}", "status": status, "measured": {"max_abs": 1.0} if status == "fail" else None,
            "expected": "", "detail": f"{comp} {status}", "data": d, "location": location}


def _result(*checks):
    return {"assignment": "lm", "checks": list(checks), "submission": "repo"}


def _where(file, line):
    return {"file": file, "line": line}


def test_failures_first_then_course_invisible_deviations_then_unfinished_parts():
    fp = {"mutant": "lm-rmsnorm-no-upcast", "cause": "rmsnorm-no-float32-upcast", "summary": "no float32 upcast",
          "max_abs": 0.0, "draws": 3}
    r = _result(
        _check("silu", "skip", "not-implemented"),
        _check("rmsnorm", "fail", "mismatch", _where("pkg/norm.py", 12), fingerprint=fp),
        _check("sdpa", "fail", "mismatch", _where("pkg/attn.py", 30)))
    d = diagnose(r)
    assert [x["id"] for x in d] == ["component-mismatch", "rmsnorm-no-float32-upcast", "not-implemented"]
    assert d[0]["confidence"] < d[1]["confidence"] < 1     # the order is not the confidence's
    assert any(e.startswith("what it costs:") and "float16" in e for e in d[1]["evidence"])
    # the cause is the registry's for the mutant id the child names, never the child's own `cause` field
    forged = dict(fp, mutant="no-such-mutant")
    r = _result(_check("rmsnorm", "fail", "mismatch", _where("pkg/norm.py", 12), fingerprint=forged))
    assert [x["id"] for x in diagnose(r)] == ["component-mismatch"]


def test_a_failure_that_starts_inside_another_failing_component_is_folded_into_it():
    r = _result(
        _check("rmsnorm", "fail", "mismatch", _where("pkg/nn.py", 12), lines={"pkg/nn.py": [10, 11, 12]}),
        _check("block", "fail", "mismatch", _where("pkg/nn.py", 12), lines={"pkg/nn.py": [10, 11, 12, 40, 41]}))
    d = diagnose(r)
    assert [x.get("component") for x in d] == ["rmsnorm"]
    assert any("also explains lm-block" in e for e in d[0]["evidence"])


def test_a_failure_that_starts_in_its_own_code_is_its_own_diagnosis():
    # the block uses the broken RMSNorm, but its traced run first diverges on its own line (a missing residual)
    r = _result(
        _check("rmsnorm", "fail", "error", _where("pkg/nn.py", 12), lines={"pkg/nn.py": [10, 11, 12]}),
        _check("block", "fail", "mismatch", _where("pkg/nn.py", 41), lines={"pkg/nn.py": [10, 11, 40, 41]}))
    d = diagnose(r)
    assert sorted(x.get("component") for x in d) == ["block", "rmsnorm"]
    block = next(x for x in d if x.get("component") == "block")
    assert block["location"] == {"file": "pkg/nn.py", "line": 41}
    assert not any("lm-block" in e for x in d if x.get("component") == "rmsnorm" for e in x["evidence"])


def test_no_folding_without_a_location_measured():
    # the build order alone (a block is built from RMSNorm) is no evidence
    r = _result(
        _check("rmsnorm", "fail", "mismatch", _where("pkg/nn.py", 12), lines={"pkg/nn.py": [12]}),
        _check("block", "fail", "mismatch", None))
    assert sorted(x.get("component") for x in diagnose(r)) == ["block", "rmsnorm"]


def test_inputs_beyond_the_course_are_an_info_note_and_leave_the_verdict_clean():
    notes = [{"case": "x[5, 16] (beyond the course's inputs)", "problem": "run_linear raised IndexError",
              "location": _where("pkg/linear.py", 9)}]
    r = _result(_check("linear", "pass", robustness=notes), _check("sdpa", "pass"))
    d = diagnose(r)
    assert [(x["id"], x["severity"], x["component"]) for x in d] == [("robustness-note", "info", "linear")]
    assert d[0]["location"] == {"file": "pkg/linear.py", "line": 9}
    assert verdict(d) == "clean"


def test_a_failing_component_with_robustness_notes_is_still_a_failure():
    notes = [{"case": "x[5, 16] (beyond the course's inputs)", "problem": "differs", "location": None}]
    r = _result(_check("linear", "fail", "mismatch", _where("pkg/linear.py", 9), robustness=notes))
    d = diagnose(r)
    assert [x["id"] for x in d] == ["component-mismatch"] and verdict(d) == "problems"
