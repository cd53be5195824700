"""The lm diagnosis library's bars, in process but over the whole mutant library and corpus (minutes): every lm mutant fingerprinted as its own cause, correct entries clean, the corpus bugs named; the library's rules and rubric: tests/unit/test_lmdiag.py."""
from __future__ import annotations

import pytest
from harness.child.probes.lm.diag import cause_ids, properties
from harness.child.probes.lm.diag.diagnose import diagnose_adapters, diagnose_component, first_failing
from harness.child.probes.lm.diag.fingerprint import fingerprint, variant
from harness.child.probes.lm.diag.inputs import ADAPTER, COMPONENTS
from mutants.lm_registry import LM_MUTANTS

from test_lmdiag import INTERFACE, LM, MANIFEST, NUMERIC, _adapters, _corpus_scores, _mid, _novel_bugs, lmcorpus  # noqa: F401 (fixtures, helpers)


@pytest.mark.parametrize("mutant", NUMERIC, ids=_mid)
def test_mutant_fingerprints_as_its_own_cause(mutant):
    fn = getattr(variant(mutant.id), ADAPTER[mutant.component])
    found = fingerprint(mutant.component, fn)
    assert found is not None, mutant.id
    assert found["cause"] == mutant.cause and found["mutant"] == mutant.id, found
    assert found["also"] == [] and found["confidence"] >= 0.9       # no other mutant gives the same numbers
    assert "equals the reference with the edit" in found["evidence"][0] and "5 draws" in found["evidence"][0]


@pytest.mark.parametrize("mutant", INTERFACE, ids=_mid)
def test_interface_mutant_is_an_interface_mismatch(mutant):
    result = diagnose_component(mutant.component, getattr(variant(mutant.id), ADAPTER[mutant.component]))
    assert result["status"] == "fail" and result["cause"] == "interface-mismatch", result
    assert result["evidence"] and result["errors"]


@pytest.mark.slow
@pytest.mark.sweep     # every lm mutant run again: tests/quality/test_selftest_lm.py runs them all
@pytest.mark.parametrize("mutant", LM_MUTANTS, ids=_mid)
def test_mutant_first_failing_component(mutant):
    """Over every component, the first one that fails is the mutant's, with the mutant's cause."""
    comp, top = first_failing(_adapters(variant(mutant.id)))
    assert comp == mutant.component, comp
    assert top["cause"] == mutant.cause


@pytest.mark.parametrize("entry", [e for e in MANIFEST if e["kind"] == "correct"], ids=lambda e: e["path"])
def test_correct_entry_is_clean(entry):
    with lmcorpus.loaded(LM / entry["path"]) as adapters:
        report = diagnose_adapters(adapters)
        bad = {c: r["evidence"] for c, r in report["components"].items() if r["status"] != "pass"}
        assert bad == {}, bad
        for comp in COMPONENTS:                     # properties never accuse a correct style either
            failed = [p["id"] for p in properties.check(comp, adapters[ADAPTER[comp]]) if not p["passed"]]
            assert failed == [], (comp, failed)


@pytest.mark.slow
def test_corpus_bugs_calibration():
    n, component_ok, cause_ok, wrong_high = _corpus_scores("calibration")
    assert component_ok == n
    assert cause_ok >= 0.8 * n
    assert wrong_high == []


@pytest.mark.slow
def test_corpus_bugs_holdout_measured():
    """Held out: measured and printed (run with -s); only the component is asserted, never tuned on."""
    n, component_ok, cause_ok, wrong_high = _corpus_scores("holdout")
    assert n >= 10
    assert component_ok == n


def test_novel_bugs_named_on_their_component_never_wrongly_accused():
    base = _adapters(variant(None))
    for name, (adapter, fn, comp, acceptable) in _novel_bugs().items():
        report = diagnose_adapters(dict(base, **{adapter: fn}))
        top = report["components"][comp]
        assert report["first_failing"] == comp, (name, report["first_failing"])
        assert top["confidence"] < 0.8 or top["cause"] in acceptable, (name, top["cause"], top["confidence"])
        assert top["evidence"], name
        assert all(r["cause"] in cause_ids() for r in report["components"].values() if r["cause"]), name
