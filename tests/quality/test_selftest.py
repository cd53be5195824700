"""The self-test's bar end to end: every mutant named first and correct code clean, through real checks; the rules on recorded payloads in-process: tests/unit/test_goldens.py and tests/unit/test_engine.py."""
from __future__ import annotations

import pytest
from harness.selftest import correct_cases, mutant_cases, run_cases, summarise
from mutants import apply_edits, get, reference_source

from test_engine import COMBOS  # noqa: F401, F811 (fixtures, helpers)


@pytest.mark.slow
def test_selftest_every_mutant_top1_and_correct_code_clean(tmp_path):
    """The issue's bar: 100% top-1, no false alarm, no second diagnosis >= 0.5, lines on the mutated line."""
    cases = correct_cases() + mutant_cases(tmp_path)
    rows = run_cases(cases, quick=True, jobs=2)
    s = summarise(rows)
    wrong = [(r["case"], r["expected"], r["top"], r["others"]) for r in rows if not r["ok"] or r["second_strong"]]
    assert not wrong, wrong
    assert s["accuracy"] == 1.0 and s["false_alarms"] == 0
    misplaced = [(r["case"], r["line"], r["bug_lines"]) for r in rows
                 if r["expected"] and len(r["bug_lines"]) == 1 and not r["line_ok"]]
    assert not misplaced, misplaced


@pytest.mark.slow
def test_two_independent_bugs_are_both_named(tmp_path):
    """A file with two bugs names both causes, each as confidently as when its bug is alone.

    Each cause's own rule sets its confidence (inf-mask-nan, whose NaN needs a fully padded source that
    ordinary batches never have, is reported below 0.5 even alone); a second, independent bug must not
    lower it nor hide it."""
    from harness.selftest import Case
    cases = []
    for a, b in COMBOS:
        ma, mb = get(a), get(b)
        for name, edits, expected in ((f"{a}+{b}", ma.edits + mb.edits, ma.cause),
                                      (a, ma.edits, ma.cause), (b, mb.edits, mb.cause)):
            p = tmp_path / f"{name}.py"
            p.write_text(apply_edits(reference_source(ma.reference), edits))
            cases.append(Case(p.name, p, expected))
    rows = run_cases(cases, quick=True, jobs=2)
    conf = [{row["top"]: row["top_confidence"], **dict(row["others"])} for row in rows]
    for i, (a, b) in enumerate(COMBOS):
        both, alone_a, alone_b = conf[3 * i: 3 * i + 3]
        for cause, alone in ((get(a).cause, alone_a), (get(b).cause, alone_b)):
            assert cause in alone and cause in both, (a, b, cause, both, alone)
            assert both[cause] >= alone[cause] - 0.05, (a, b, cause, both[cause], alone[cause])
        assert sum(c >= 0.5 for c in (both[get(a).cause], both[get(b).cause])) >= \
            sum(c >= 0.5 for c in (alone_a[get(a).cause], alone_b[get(b).cause])), (a, b, both)
