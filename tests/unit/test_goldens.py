"""The parent's rules on recorded child payloads, in-process: every cause's rule, the verdict and the
validated checks, replayed from the goldens bench/record_goldens.py recorded from the self-test's cases
(every mutant, the reference, the lesson's code, the lm mutants) and the corpus.

A payload is what the child measured; the parent's result from it (engine.build_result: validation, rules,
folding, ranking, verdict) must be what it was when recorded. A change to a rule, a cause or the engine
that moves a diagnosis fails here in seconds; the self-test (tests/quality) proves the same end to end in
minutes. Schema 1 stays as recorded: the same keys, the same values.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOLDENS = Path(__file__).resolve().parent / "goldens"
_spec = importlib.util.spec_from_file_location("record_goldens", ROOT / "bench" / "record_goldens.py")
recorder = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(recorder)

FILES = sorted(GOLDENS.glob("*.json"))
RERECORD = (f"if this change was on purpose, re-record with `{recorder.COMMAND} --only NAME` "
            f"(or without --only for every case)")


def _load(p: Path) -> dict:
    return json.loads(p.read_text())


def _diff(recorded, now, path="result") -> str:
    """The first place two JSON values differ, to say what moved."""
    if type(recorded) is not type(now):
        return f"{path}: {recorded!r} -> {now!r}"
    if isinstance(recorded, dict):
        for k in sorted(set(recorded) | set(now)):
            if recorded.get(k) != now.get(k):
                return _diff(recorded.get(k), now.get(k), f"{path}.{k}")
    if isinstance(recorded, list):
        if len(recorded) != len(now):
            return f"{path}: {len(recorded)} items -> {len(now)}: {[_brief(x) for x in recorded]} -> " \
                   f"{[_brief(x) for x in now]}"
        for i, (a, b) in enumerate(zip(recorded, now)):
            if a != b:
                return _diff(a, b, f"{path}[{i}]")
    return f"{path}: {recorded!r} -> {now!r}"


def _brief(x):
    return x.get("id", x) if isinstance(x, dict) else x


def test_goldens_are_recorded():
    assert FILES, f"no goldens in {GOLDENS}: record them with `{recorder.COMMAND}`"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_replayed_payload_gives_the_recorded_result(path):
    g = _load(path)
    now = json.loads(json.dumps(recorder.replay(g)))      # the JSON a user would read
    assert now == g["result"], f"{path.name}: {_diff(g['result'], now)}\n{RERECORD.replace('NAME', g['case'])}"


@pytest.mark.parametrize("path", [p for p in FILES if _load(p)["expected_cause"]], ids=lambda p: p.stem)
def test_each_mutant_golden_names_its_cause(path):
    """What the self-test proves end to end, on the recorded payload: the mutant's cause is named first
    (lm: the cause is named among the diagnoses; its first-round bar is the component, tests/quality)."""
    g = _load(path)
    ids = [d["id"] for d in g["result"]["diagnoses"]]
    if g["requested_assignment"] == "lm":
        assert g["expected_cause"] in ids, f"{g['case']}: {ids}"
    else:
        assert ids[:1] == [g["expected_cause"]], f"{g['case']}: {ids}"


def test_no_mutant_golden_keeps_a_second_diagnosis_at_half_or_more():
    """The self-test's bar on the recorded payloads (selftest's second_strong): a mutant's one bug is one
    diagnosis; what else its symptoms show is folded into it (lm: a component that computes exactly the
    reference built on a failing part's known bug) or stays below 0.5."""
    strong = []
    for p in FILES:
        g = _load(p)
        if g["expected_cause"]:
            others = [(d["id"], d.get("component"), d["confidence"]) for d in g["result"]["diagnoses"][1:]]
            strong += [(g["case"], o) for o in others if o[2] >= 0.5]
    assert not strong, strong


def test_correct_code_goldens_are_clean():
    """The reference, the lesson's code, the correct fixtures and the corpus's correct files come back clean
    (a corpus bug has no expected cause in its golden: the manifest says it is a bug)."""
    kinds = recorder.corpus_kinds()
    for p in FILES:
        g = _load(p)
        if g["expected_cause"] is None and g["status"] == "ok" and kinds.get(g["case"], "correct") == "correct":
            assert g["result"]["verdict"] == "clean", (g["case"], [d["id"] for d in g["result"]["diagnoses"]])


def test_every_rule_is_exercised_by_some_golden():
    """Every cause that has a mutant has a golden whose replay names it: its rule runs in this tier."""
    import mutants
    named = {d["id"] for p in FILES for d in _load(p)["result"]["diagnoses"]}
    wanted = {m.cause for m in list(mutants.MUTANTS) + list(mutants.LM_MUTANTS)}
    recorded = {_load(p)["case"] for p in FILES}
    missing = sorted(c for c in wanted - named
                     if any(m.cause == c and m.id in recorded for m in list(mutants.MUTANTS) + list(mutants.LM_MUTANTS)))
    assert not missing, f"causes whose recorded mutants no longer name them: {missing}"
    unrecorded = sorted({m.id for m in list(mutants.MUTANTS) + list(mutants.LM_MUTANTS)} - recorded)
    assert not unrecorded, f"mutants without a golden: {unrecorded}; record them with `{recorder.COMMAND}`"


def test_a_changed_rule_is_caught_with_the_rerecord_message(monkeypatch):
    """The comparison can fail: a rule that stops firing changes a replayed result."""
    from harness import causes
    g = next((_load(p) for p in FILES if _load(p)["expected_cause"] and _load(p)["requested_assignment"] != "lm"),
             None)
    if g is None:
        pytest.skip("no mutant golden recorded")
    rule = next(r for r in causes.RULES if r.CAUSE.id == g["expected_cause"])
    monkeypatch.setattr(rule, "diagnose", lambda ev: None)
    assert recorder.replay(g) != g["result"]
