"""The rule a repair's re-check is judged by (harness/repair/verify.py): the cited failures must now pass and
no check that BOTH runs measured may get worse. A full check's training checks, which the quick re-check does
not run (absent, or its probe reported as not run), are no change and never a pass. No child process here."""
from __future__ import annotations

from harness.checks import passes
from harness.repair import show, verify


def _c(i, status, measured=None, **data):
    return {"id": i, "status": status, "measured": measured, "data": data}


# a full (non-quick) check of a file whose attention scores are not scaled: the training probe measured too
BEFORE = {c["id"]: c for c in (
    _c("attn-saturation", "fail", 0.78), _c("shapes", "pass"), _c("overfit", "pass", 0.01),
    _c("brief-training", "info", 0.4), _c("decode-accuracy", "info", 0.9),
    _c("cross-attn-pattern", "info", {"anti_diagonal": 0.5}))}
TARGETS = ["attn-saturation"]
NOT_RUN = _c("brief-training", "skip", None, not_run=True)     # the quick re-check's word for the training probe


def _after(**more):
    out = {"attn-saturation": _c("attn-saturation", "pass", 0.44), "shapes": _c("shapes", "pass"),
           "overfit": _c("overfit", "pass", 0.01)}
    out.update(more)
    return out


def test_a_training_check_the_quick_recheck_did_not_run_is_no_change():
    for after in (_after(), _after(**{"brief-training": NOT_RUN})):      # absent, or reported as not run
        assert verify.changed(BEFORE, after, TARGETS, set()) == []
        assert verify.not_rerun(BEFORE, after, []) == ["brief-training", "cross-attn-pattern", "decode-accuracy"]


def test_a_check_both_runs_measured_that_got_worse_still_rejects():
    after = _after(**{"brief-training": NOT_RUN, "shapes": _c("shapes", "fail")})
    assert verify.changed(BEFORE, after, TARGETS, set()) == ["shapes: pass -> fail"]
    # a pass that cannot measure the patched model (a skip without not_run) is a change, as before
    after = _after(overfit=_c("overfit", "skip"))
    assert verify.changed(BEFORE, after, TARGETS, set()) == ["overfit: pass -> skip"]


def test_a_probe_that_ran_and_lost_a_check_is_a_change():
    """The training probe ran this time (not not_run) but no longer reports one of its checks: measured ->
    unmeasured, which only a run that did not run the probe may excuse."""
    after = _after(**{"brief-training": _c("brief-training", "info", 0.3),
                      "decode-accuracy": _c("decode-accuracy", "info", 0.95)})
    assert verify.changed(BEFORE, after, TARGETS, set()) == ["cross-attn-pattern: info -> None"]
    assert verify.not_rerun(BEFORE, after, []) == []


def test_a_check_not_run_is_never_a_pass():
    after = _after(**{"brief-training": NOT_RUN})
    assert not passes(after, ["decode-accuracy"]) and not passes(after, ["brief-training"])
    assert not passes(_after(), ["cross-attn-pattern"])
    # a failure whose probe was not run did not go: it is neither a change nor also fixed (see below)
    before = dict(BEFORE, **{"brief-training": _c("brief-training", "fail", 3.0)})
    assert verify.changed(before, after, TARGETS, set()) == []


def test_carried_probes_are_not_listed_as_not_rerun():
    after = _after()
    del after["overfit"]
    assert verify.not_rerun(BEFORE, after, ["overfit"]) == ["brief-training", "cross-attn-pattern",
                                                           "decode-accuracy"]
    assert "overfit" in verify.not_rerun(BEFORE, after, [])
    # a check shared by two probes (ffn-nonlinear: structure and block-structure) counts as carried by either
    before = dict(BEFORE, **{"ffn-nonlinear": _c("ffn-nonlinear", "pass")})
    assert "ffn-nonlinear" not in verify.not_rerun(before, _after(), ["structure", "overfit"])


def test_the_repair_verifies_and_says_what_it_did_not_compare():
    """The whole flow with a fake quick re-check of a full check: the usual fix verifies, the terminal line
    names the repair and the training checks left uncompared; a failure in a probe not run is not also_fixed."""
    src = "import math\ndef scores(q, k, d_k):\n    return q @ k.transpose(-2, -1)\n"
    before = dict(BEFORE, **{"brief-training": _c("brief-training", "info", 0.4)})
    result = {"checks": list(before.values()), "diagnoses": [
        {"id": "missing-sqrt-dk", "confidence": 0.9, "evidence": ["attn-saturation: measured 0.78, expected < 0.62"],
         "location": {"file": "f.py", "line": 3}}]}

    def recheck(code, only, extra, gate=""):
        ok = "** 0.5" in code.splitlines()[2]
        return _after(**{"attn-saturation": _c("attn-saturation", "pass" if ok else "fail", 0.44 if ok else 0.78),
                         "brief-training": NOT_RUN})
    verify.repair(result, src, "f.py", recheck)
    rep = result["diagnoses"][0]["repair"]
    assert rep["verified"] and rep["found_by"] == "catalogue" and rep["also_fixed"] == []
    assert rep["not_rerun"] == ["brief-training", "cross-attn-pattern", "decode-accuracy"]
    line = show.summary(rep)
    assert line.startswith("repair verified (the usual fix): ") and f"at line {rep['line']}" in line
    assert "not re-run by the quick re-check, not compared: brief-training" in line
    assert "not compared: brief-training" in result["diagnoses"][0]["evidence"][-1]
