"""The parent's lm ranking and folding (harness/causes/lm_rank.py through engine.diagnose), issue 47: what the
course's own tests see first (measured by the child's replay on the course's inputs: data.course_replay),
what they cannot see after with what it costs, unfinished parts, then the environment; and a component's own
evidence before a fold into another's diagnosis. In-process, hand-made check records, no child."""
from __future__ import annotations

from harness.causes import lm_decide
from harness.causes.lm_rank import ENVIRONMENT, INVISIBLE, UNFINISHED, VISIBLE, order
from harness.engine import KEY_MAX, diagnose, validate_payload


def _check(comp, status, kind=None, location=None, lines=None, **data):
    d = {"component": comp, "adapter": f"run_{comp}", **data}
    if kind:
        d["kind"] = kind
    if lines is not None:
        d["lines"] = lines
    return {"id": f"lm-{comp}", "status": status, "measured": {"max_abs": 1.0} if status == "fail" else None,
            "expected": "", "detail": f"{comp} {status} on its case", "data": d, "location": location}


def _result(*checks):
    """Through the engine's validation, as the child's payload would be (lm_decide.annotate on each check)."""
    p = validate_payload({"checks": list(checks), "load": {"ok": True}, "assignment": "lm"})
    return {"assignment": "lm", "checks": p["checks"], "submission": "repo"}


def _where(file, line):
    return {"file": file, "line": line}


SEEN = {"visible": True, "test": "test_transformer_block", "problem": "raises RuntimeError: size mismatch"}
UNSEEN = {"visible": False, "test": "test_transformer_block", "max_abs": 3e-8, "tolerance": 1e-6}


# ----------------------------------------------------------------------------- order by what the course sees

def test_a_failure_the_course_cannot_see_ranks_after_one_it_sees_whatever_the_confidence():
    # the block's own check fails (batch 2 != 4 heads) but its replay on the course's inputs agrees; the
    # linear layer fails there too: the linear layer comes first although its finding is the weaker one
    r = _result(_check("block", "error", "error", _where("pkg/block.py", 40), course_replay=UNSEEN),
                _check("linear", "fail", "mismatch", _where("pkg/linear.py", 9),
                       course_replay={"visible": True, "test": "test_linear", "max_abs": 0.5, "tolerance": 0.01}))
    d = diagnose(r)
    assert [x["component"] for x in d] == ["linear", "block"]
    block = d[1]
    assert any(e.startswith("the course's own tests cannot see it (test_transformer_block)") and
               "what it costs: it fails on other inputs the interface allows: block error on its case" in e
               for e in block["evidence"])
    assert any(e.startswith("the course's own tests see it (test_linear)") and "differs from the reference by 0.5"
               in e for e in d[0]["evidence"])


def test_the_measurement_outranks_the_static_table():
    # a cause the table calls course-invisible, measured visible on the course's inputs: first
    fp = {"mutant": "lm-rmsnorm-no-upcast", "max_abs": 0.0, "draws": 3, "summary": "no upcast"}
    r = _result(_check("rmsnorm", "fail", "mismatch", _where("pkg/norm.py", 12), fingerprint=fp,
                       course_replay=dict(SEEN, test="test_rmsnorm")),
                _check("linear", "fail", "mismatch", _where("pkg/linear.py", 9)))
    d = diagnose(r)
    assert [x["id"] for x in d] == ["rmsnorm-no-float32-upcast", "component-mismatch"]
    assert not any(e.startswith("what it costs") for e in d[0]["evidence"])
    # unmeasured, the table decides (and says what it costs)
    r = _result(_check("rmsnorm", "fail", "mismatch", _where("pkg/norm.py", 12), fingerprint=fp),
                _check("linear", "fail", "mismatch", _where("pkg/linear.py", 9)))
    d = diagnose(r)
    assert [x["id"] for x in d] == ["component-mismatch", "rmsnorm-no-float32-upcast"]
    assert any(e.startswith("what it costs:") and "float16" in e for e in d[1]["evidence"])


def test_a_diagnosis_the_course_sees_through_a_failure_it_explains_ranks_first():
    # RoPE passes the course's inputs, but the attention with RoPE, whose failure starts in RoPE's lines, does not
    r = _result(
        _check("rope", "fail", "mismatch", _where("pkg/rope.py", 5), lines={"pkg/rope.py": [5]},
               course_replay=dict(UNSEEN, test="test_rope")),
        _check("mha-rope", "fail", "mismatch", _where("pkg/rope.py", 5), lines={"pkg/rope.py": [5], "pkg/a.py": [9]},
               course_replay=dict(SEEN, test="test_multihead_self_attention_with_rope")),
        _check("linear", "fail", "mismatch", _where("pkg/linear.py", 9), course_replay=UNSEEN))
    d = diagnose(r)
    assert [x["component"] for x in d] == ["rope", "linear"]
    assert [order(x, None) for x in d] == [VISIBLE, VISIBLE]         # without the evidence: the static table


def test_environment_findings_come_after_every_failure_and_unfinished_part():
    missing = _check("rope", "error", "missing-module", _where("pkg/rope.py", 3), missing_module="wandb")
    r = _result(missing, _check("silu", "skip", "not-implemented"),
                _check("linear", "fail", "mismatch", _where("pkg/linear.py", 9), course_replay=UNSEEN))
    d = diagnose(r)
    assert [x["id"] for x in d] == ["component-mismatch", "not-implemented", "missing-module"]
    assert d[2]["confidence"] > d[0]["confidence"]            # the order is not the confidence's
    assert [order(x) for x in ({"id": "missing-module"}, {"id": "not-implemented"}, {"id": "x", "component": "a"},
                               {"id": "adamw-eps-inside-sqrt"})] == [ENVIRONMENT, UNFINISHED, VISIBLE, INVISIBLE]


def test_a_forged_replay_is_dropped_by_the_parent():
    for bad in ({"visible": "yes"}, {"visible": True, "max_abs": [1]}, ["visible"], {"visible": False, "test": 3}):
        p = validate_payload({"checks": [_check("linear", "fail", "mismatch", course_replay=bad)],
                              "load": {"ok": True}, "assignment": "lm"})
        kept = p["checks"][0]["data"].get("course_replay")
        assert kept is None or (isinstance(kept["visible"], bool) and isinstance(kept.get("test", ""), str)
                                and not isinstance(kept.get("max_abs"), list))


# ----------------------------------------------------------------------------- own evidence before a fold

ARGS = [{"file": "tests/adapters.py", "line": 400, "callee": "TransformerLM", "argument": "rope_theta",
         "slot": "max_seq_len"}]


def test_own_evidence_keeps_a_component_its_own_diagnosis_despite_a_traced_divergence():
    # the LM's traced run first diverges on a line the broken block ran, but its adapter passes rope_theta into
    # max_seq_len: its own mechanism, its own diagnosis (not "also explains lm-lm" under the block)
    r = _result(
        _check("block", "error", "error", _where("pkg/t.py", 121), lines={"pkg/t.py": [100, 121, 201]}),
        _check("lm", "fail", "mismatch", _where("pkg/t.py", 201), lines={"pkg/t.py": [100, 121, 201, 300]},
               argument_order=ARGS))
    d = diagnose(r)
    assert sorted(x["component"] for x in d) == ["block", "lm"]
    lm = next(x for x in d if x["component"] == "lm")
    assert lm["id"] == "interface-mismatch" and lm["location"] == {"file": "tests/adapters.py", "line": 400}
    block = next(x for x in d if x["component"] == "block")
    assert not any("also explains lm-lm" in e for e in block["evidence"])


def test_a_fold_holds_for_a_repository_under_a_long_folder():
    # the lines a component ran are keyed by file path: a path of 100+ characters must come through the
    # validation whole (a cut key matched nothing, and the lm failure came back as a diagnosis of its own)
    f = "/tmp/" + "d" * 120 + "/student/cs336_basics/model.py"
    r = _result(_check("rope", "fail", "mismatch", _where(f, 93), lines={f: [90, 93]}),
                _check("lm", "error", "error", _where(f, 93), lines={f: [10, 90, 93]}))
    assert [x["component"] for x in diagnose(r)] == ["rope"]
    too_long = {"x" * (KEY_MAX + 1): [1], "ok": [2]}
    assert validate_payload({"checks": [_check("rope", "fail", lines=too_long)]})["checks"][0]["data"]["lines"] \
        == {"ok": [2]}


def test_a_fingerprint_of_its_own_bug_keeps_it_and_an_upstream_one_does_not():
    own = {"mutant": "lm-block-post-norm", "max_abs": 0.0, "draws": 3, "summary": "post-norm"}
    upstream = {"mutant": "lm-rmsnorm-gain-ignored", "max_abs": 0.0, "draws": 3, "summary": "gain ignored"}
    for fp, folded in ((own, False), (upstream, True)):
        r = _result(
            _check("rmsnorm", "fail", "mismatch", _where("pkg/nn.py", 12), lines={"pkg/nn.py": [10, 11, 12]}),
            _check("block", "fail", "mismatch", _where("pkg/nn.py", 12), lines={"pkg/nn.py": [10, 12, 40]},
                   fingerprint=fp))
        comps = [x["component"] for x in diagnose(r)]
        assert (comps == ["rmsnorm"]) is folded, (fp["mutant"], comps)


def _measured(comp, cause, prop_component=None):
    """Validated lmdiag measurements whose decision is a failed property naming `cause`."""
    return {"component": comp, "adapter": f"run_{comp}", "status": "fail", "draws": 2,
            "err": {"case": "c", "draw": 0, "max_abs": 1.0, "max_rel": 0.5, "shape": [[2, 3]],
                    "expected_shape": [[2, 3]]},
            "interface": [], "fingerprint": None, "not_measured": {},
            "properties": [{"id": "p", "component": prop_component or comp, "what": "w", "measured": 1,
                            "expected": 0, "passed": False, "cause": cause, "confidence": 0.85}]}


def test_a_decision_counts_as_own_only_for_a_cause_nothing_below_can_produce():
    assert lm_decide.own_cause(lm_decide.validate(_measured("block", "missing-residual")))
    # a causal-mask property of the block is the attention's as much as the block's
    assert not lm_decide.own_cause(lm_decide.validate(_measured("block", "future-tokens-visible")),
                                   {"future-tokens-visible"})
    # heads split wrong is the attention's own bug, and the block's only through it
    assert lm_decide.own_cause(lm_decide.validate(_measured("mha", "heads-split-wrong")))
    assert not lm_decide.own_cause(lm_decide.validate(_measured("block", "heads-split-wrong")))
    r = _result(
        _check("mha", "fail", "mismatch", _where("pkg/nn.py", 30), lines={"pkg/nn.py": [30, 31]}),
        _check("block", "fail", "mismatch", _where("pkg/nn.py", 30), lines={"pkg/nn.py": [30, 31, 40]},
               lmdiag_measured=_measured("block", "future-tokens-visible")))
    assert [x["component"] for x in diagnose(r)] == ["mha"]
    r = _result(
        _check("mha", "fail", "mismatch", _where("pkg/nn.py", 30), lines={"pkg/nn.py": [30, 31]}),
        _check("block", "fail", "mismatch", _where("pkg/nn.py", 30), lines={"pkg/nn.py": [30, 31, 40]},
               lmdiag_measured=_measured("block", "missing-residual")))
    assert sorted(x["component"] for x in diagnose(r)) == ["block", "mha"]


def test_a_package_the_grader_lacks_ranks_after_the_measured_bugs(monkeypatch):
    # the environment's finding (a grader fault: the assignment allows the package) comes last, below the
    # student's measured bug, however sure it is; the check still stops as the grader's fault (regraded)
    from harness import allowed
    from harness.engine import build_result
    from harness.outcome import ChildOutcome
    monkeypatch.setitem(allowed.ALLOWED, "lm", allowed.ALLOWED["lm"] + ("wandb",))
    payload = {"checks": [_check("rope", "error", "missing-module", _where("pkg/rope.py", 3), missing_module="wandb"),
                          _check("linear", "fail", "mismatch", _where("pkg/linear.py", 9),
                                 course_replay=dict(SEEN, test="test_linear"))],
               "load": {"ok": True}, "assignment": "lm"}
    r = build_result(ChildOutcome(payload, "ok"), "repo", "lm")
    assert [x["id"] for x in r["diagnoses"]] == ["component-mismatch", "grader-fault"]
    assert r["diagnoses"][1]["confidence"] > r["diagnoses"][0]["confidence"]
    assert "pip install wandb" in r["diagnoses"][1]["fix"]
    assert r["error"]["student_fault"] is False and r["verdict"] == "error"


def _fingerprinted(comp, mutant):
    """Validated-to-be lmdiag measurements of comp whose outputs equal the reference with `mutant`'s edit."""
    return {"component": comp, "adapter": f"run_{comp}", "status": "fail", "draws": 2,
            "err": {"case": "c", "draw": 0, "max_abs": 1.0, "max_rel": 0.5, "shape": [[2, 3]],
                    "expected_shape": [[2, 3]]},
            "interface": [], "not_measured": {}, "properties": [],
            "fingerprint": {"mutant": mutant, "max_diff": 0.0, "draws": 5, "cases": 1, "also": []}}


def test_outputs_equal_to_a_failing_parts_known_bug_fold_into_it_without_a_trace():
    # the LM's traced divergence is on its own line (no fold by the trace), but its outputs equal the reference
    # built on RMSNorm's known bug, and the student's RMSNorm fails: one diagnosis, the RMSNorm's, not a second
    # one at 0.95 on the LM for the same bug
    norm = _check("rmsnorm", "fail", "mismatch", _where("pkg/nn.py", 12), lines={"pkg/nn.py": [10, 11, 12]},
                  fingerprint={"mutant": "lm-rmsnorm-subtracts-mean", "max_abs": 0.0, "draws": 5, "summary": "s"})
    lm = _check("lm", "fail", "mismatch", _where("pkg/nn.py", 168), lines={"pkg/nn.py": [10, 11, 12, 168]},
                lmdiag_measured=_fingerprinted("lm", "lm-rmsnorm-subtracts-mean"))
    d = diagnose(_result(norm, lm))
    assert [(x["component"], x["id"]) for x in d] == [("rmsnorm", "rmsnorm-subtracts-mean")]
    assert any(e.startswith("also explains lm-lm") for e in d[0]["evidence"])
    # the part the fingerprint names passes its own check: nothing to fold into, the LM keeps its diagnosis
    ok = _check("rmsnorm", "pass")
    d = diagnose(_result(ok, lm))
    assert [(x["component"], x["id"]) for x in d] == [("lm", "rmsnorm-subtracts-mean")]
    # a fingerprint of the component's own bug is its own evidence, whatever fails below it
    block = _check("block", "fail", "mismatch", _where("pkg/nn.py", 147), lines={"pkg/nn.py": [10, 11, 12, 147]},
                   lmdiag_measured=_fingerprinted("block", "lm-block-post-norm"))
    d = diagnose(_result(norm, block))
    assert sorted(x["component"] for x in d) == ["block", "rmsnorm"]


def test_a_training_failure_ranks_after_a_crash_the_course_sees():
    # the course's tests never train the model: a piece whose own check passes but whose brief training leaves
    # the reference's curve (0.85) ranks after a component the course's tests see raise (0.6)
    training = {"id": "lm-training", "status": "fail", "measured": {"curve_gap": 0.01}, "expected": "",
                "detail": "the loss leaves the reference's at step 1", "location": _where("pkg/lm.py", 19),
                "data": {"kind": "training", "component": "lm", "culprits": ["model"]}}
    rope = _check("rope", "error", "error", _where("pkg/rope.py", 45),
                  course_replay=dict(SEEN, test="test_rope", problem="raises RuntimeError: size mismatch"))
    d = diagnose(_result(training, rope, _check("lm", "pass")))
    assert [(x["component"], x["id"]) for x in d] == [("rope", "forward-error"), ("lm", "training-fails")]
    assert d[1]["confidence"] > d[0]["confidence"]
    assert any(e.startswith("what it costs:") and "never training" in e for e in d[1]["evidence"])
    assert order({"id": "optimizer-missing-parameters", "component": "lm"}) == INVISIBLE


def test_a_check_that_could_not_be_measured_ranks_after_every_measured_failure():
    # check-not-measured names no failure of the code: a course-invisible finding that was measured comes first
    fp = {"mutant": "lm-rmsnorm-no-upcast", "max_abs": 0.0, "draws": 3, "summary": "no upcast"}
    skipped = {"id": "lm-training", "status": "skip", "measured": None, "expected": "",
               "detail": "not trained: run_transformer_lm computes with copies of 11 of the 21 weights it is given",
               "location": None, "data": {"could_not_measure": "copies of the weights"}}
    r = _result(_check("rmsnorm", "fail", "mismatch", _where("pkg/norm.py", 12), fingerprint=fp,
                       course_replay=dict(UNSEEN, test="test_rmsnorm")), skipped)
    d = diagnose(r)
    assert [x["id"] for x in d] == ["rmsnorm-no-float32-upcast", "check-not-measured"], [x["id"] for x in d]
    assert order(d[1]) == UNFINISHED and order(d[0], None) == INVISIBLE
