"""The parent's lm component decision (harness/causes/lm_decide.py) on hand-made measurements: the cascade's
order and confidences, what a stage that was not measured does, and what the parent refuses to trust from
the child (a decision it sent, an unknown cause or mutant id, malformed fields). Torch-free: the module and
everything it imports are read with ast (tests/unit/test_imports.py's graph)."""
from __future__ import annotations

import ast
import copy

from harness.causes import lm_decide
from harness.engine import InvalidResult, validate_payload  # noqa: F401 - the engine's own validation
from mutants.lm_registry import LM_MUTANTS, lm_get
from test_imports import imports_of, modules

ERR = {"case": "x[2, 9, 16] positions [0, 1, 2]...8", "draw": 0, "max_abs": 0.5, "max_rel": 0.25,
       "shape": [[2, 9, 16]], "expected_shape": [[2, 9, 16]]}
PROP = {"id": "rope-pairs", "component": "rope", "what": "a rotation of e_0 stays in the pair (x[0], x[1])",
        "measured": [0, 8], "expected": "[0, 1]", "passed": False, "cause": "rope-halves-not-pairs",
        "confidence": 0.9}
WEAK = dict(PROP, id="rope-relative", cause="rope-not-relative", confidence=0.6, measured=0.3, expected="< 1e-4")
FP = {"mutant": "lm-rope-halves-not-pairs", "mutant_component": "rope", "max_diff": 1e-7, "draws": 5, "cases": 3,
      "also": []}


def measured(**kw) -> dict:
    m = {"component": "rope", "adapter": "run_rope", "status": "fail", "draws": 2, "err": ERR, "interface": [],
         "fingerprint": None, "properties": [], "not_measured": {}}
    m.update(kw)
    return copy.deepcopy(m)


def decided(**kw) -> dict:
    v = lm_decide.validate(measured(**kw))
    assert v is not None
    return lm_decide.decide(v)


def test_the_cascade_reads_interface_then_fingerprint_then_swapped_then_properties():
    swapped = {"stage": "swapped", "kind": "swapped-arguments", "evidence": ["equals the reference with a, b"]}
    none = {"stage": "output", "kind": "returned-none", "evidence": ["run_rope returned None"]}
    everything = dict(interface=[swapped, none], fingerprint=FP, properties=[WEAK, PROP])
    r = decided(**everything)
    assert (r["cause"], r["confidence"], r["interface"]) == ("interface-mismatch", 0.95, "returned-none")
    assert r["evidence"][-1].startswith(ERR["case"] + ": max abs error 0.5")
    r = decided(**dict(everything, interface=[swapped]))
    assert (r["cause"], r["confidence"], r["mutant"]) == ("rope-halves-not-pairs", 0.95, FP["mutant"])
    r = decided(**dict(everything, interface=[swapped], fingerprint=None))
    assert (r["cause"], r["confidence"]) == ("interface-mismatch", 0.9)
    r = decided(**dict(everything, interface=[], fingerprint=None))
    assert (r["cause"], r["confidence"]) == ("rope-halves-not-pairs", 0.9)      # the most confident named one
    assert r["evidence"][0] == "rope-pairs: measured [0, 8], expected [0, 1] (a rotation of e_0 stays in the " \
                               "pair (x[0], x[1]))"
    r = decided()
    assert r["cause"] is None and r["evidence"][-1].endswith("no known cause matches")


def test_interface_confidences_by_stage():
    size = {"stage": "exception", "kind": "swapped-arguments", "evidence": ["a tensor has size 5000 = theta / 2"]}
    assert decided(interface=[size])["confidence"] == 0.85
    keys = {"stage": "exception", "kind": "state-dict-keys", "evidence": ["the contract's key 'w'"]}
    assert decided(interface=[keys])["confidence"] == 0.9


def test_a_stage_not_measured_stops_the_cascade_without_a_cause():
    r = decided(fingerprint=FP, not_measured={"dtype": "RuntimeError: ours"})
    assert r["cause"] is None and r.get("internal_error") and "RuntimeError: ours" in r["evidence"][0]
    r = decided(properties=[PROP], not_measured={"swapped": "TypeError: ours"})
    assert r["cause"] is None and r.get("internal_error")
    assert decided(fingerprint=FP, not_measured={"properties": "x"})["cause"] == "rope-halves-not-pairs"


def test_fingerprints_that_name_different_causes_are_weak():
    other = next(m for m in LM_MUTANTS if m.component == "rope" and m.cause != lm_get(FP["mutant"]).cause)
    r = decided(fingerprint=dict(FP, also=[other.id]))
    assert r["confidence"] == 0.6 and other.id in r["evidence"][1]


def test_what_the_child_names_is_not_trusted():
    # a cause id the parent does not know: the property still counts as failed, but names nothing
    r = decided(properties=[dict(PROP, cause="student-is-a-genius", confidence=1.0)])
    assert r["cause"] is None and r["evidence"][0].startswith("rope-pairs")
    # a mutant id it does not know, or one of a component the measured one is not built from
    assert decided(fingerprint=dict(FP, mutant="lm-made-up"))["cause"] is None
    assert decided(fingerprint=dict(FP, mutant="lm-adamw-eps-inside-sqrt"))["cause"] is None
    # its cause and component come from the registry, not from the child
    r = decided(fingerprint=dict(FP, mutant_component="adamw", cause="x"))
    assert r["mutant_component"] == "rope" and r["cause"] == "rope-halves-not-pairs"
    # an interface kind it does not know; a confidence out of bounds
    assert decided(interface=[{"stage": "output", "kind": "trust-me", "evidence": []}])["cause"] is None
    assert lm_decide.validate(measured(properties=[dict(PROP, confidence=7)]))["properties"][0]["confidence"] == 0.0
    for bad in ({}, measured(component="../../etc"), measured(status="great"), measured(err=None), "x", None,
                measured(err=dict(ERR, max_abs=None)), measured(err=dict(ERR, max_rel={"a": 1}))):
        assert lm_decide.validate(bad) is None


def test_ids_of_the_wrong_type_are_refused_not_raised_on():
    """Lists and dicts where an id belongs (unhashable: a set or dict lookup would raise in the parent)."""
    odd = [["x"], {"a": 1}, 3, None]
    for v in odd:
        assert lm_decide.validate(measured(component=v)) is None and lm_decide.validate(measured(status=v)) is None
        m = lm_decide.validate(measured(interface=[{"stage": v, "kind": v, "evidence": v}],
                                        fingerprint=dict(FP, mutant=v, also=[v]),
                                        properties=[dict(PROP, cause=v, id="p", measured=v, expected=v)],
                                        not_measured={"x": v}))
        assert m["interface"] == [] and m["fingerprint"] is None and m["properties"][0]["cause"] is None
        assert lm_decide.decide(m)["cause"] is None
        m = lm_decide.validate(measured(status="not-implemented", why=v))
        assert lm_decide.decide(m)["evidence"] == ["run_rope raises NotImplementedError"]


def test_the_engine_drops_a_decision_the_child_sent_and_makes_its_own():
    forged = {"cause": "missing-residual", "confidence": 1.0, "evidence": ["trust me"]}
    check = {"id": "lm-rope", "status": "fail", "measured": 0.5, "expected": "", "detail": "",
             "data": {"kind": "mismatch", "lmdiag": forged}}
    p = validate_payload({"checks": [check], "assignment": "lm"})
    assert "lmdiag" not in p["checks"][0]["data"]
    check["data"]["lmdiag_measured"] = measured(properties=[PROP])
    data = validate_payload({"checks": [check], "assignment": "lm"})["checks"][0]["data"]
    assert data["lmdiag"]["cause"] == "rope-halves-not-pairs" and data["lmdiag"]["confidence"] == 0.9
    assert data["lmdiag_measured"]["properties"][0]["id"] == "rope-pairs"
    check["data"]["lmdiag_measured"] = {"component": "rope", "status": "fail"}      # no disagreement: unusable
    assert "lmdiag" not in validate_payload({"checks": [check]})["checks"][0]["data"]


def test_non_finite_numbers_read_as_the_child_printed_them():
    r = decided(err=dict(ERR, max_abs="inf", max_rel="nan"),
                properties=[dict(PROP, measured=["nan", 1.0], expected="inf")])
    assert r["evidence"][0].startswith("rope-pairs: measured [nan, 1.0], expected inf")
    assert "max abs error inf, relative nan" in r["evidence"][-1]


def test_the_decision_is_torch_free():
    """lm_decide and every harness module it reaches import no torch (anywhere in their source)."""
    known = modules()
    todo, seen = ["harness.causes.lm_decide"], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo += sorted(imports_of(name, known[name], known))
    torchy = []
    for name in sorted(seen):
        for node in ast.walk(ast.parse(known[name].read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            torchy += [name for n in names if n.split(".")[0] == "torch"]
    assert "harness.lm_property_causes" in seen and "harness.child.probes.lm.diag" not in seen and torchy == [], (seen, torchy)


def test_rope_sin_cos_swapped_says_the_edit_to_make():
    """The cause's fix is what to write (the lesson's passage is a property a student cannot act on), whether
    the fingerprint or the position-0 property names it."""
    from harness.causes import BY_ID
    from harness.engine import diagnose
    fix = BY_ID["rope-sin-cos-swapped"].fix
    assert "cos = torch.cos(angles)" in fix and "sin = torch.sin(angles)" in fix and "Swap them back" in fix
    fp = dict(FP, mutant="lm-rope-sin-cos-swapped")
    prop = dict(PROP, id="rope-identity-at-0", cause="rope-sin-cos-swapped", measured=1.0, expected="0 (< 1e-5)")
    for kw in ({"fingerprint": fp}, {"properties": [prop]}):
        check = {"id": "lm-rope", "status": "fail", "measured": 0.5, "expected": "", "detail": "d",
                 "data": {"kind": "mismatch", "component": "rope", "lmdiag_measured": measured(**kw)}}
        p = validate_payload({"checks": [check], "assignment": "lm"})
        (d,) = [d for d in diagnose({"assignment": "lm", "checks": p["checks"]}) if d["id"] == "rope-sin-cos-swapped"]
        assert d["fix"] == fix, kw
