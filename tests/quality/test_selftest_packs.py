"""A pack's self-test bar, end to end (`mtxdiag selftest --assignment PACK --quick`): every mutant the pack declares
(Pack.mutants, applied to its reference and handed in as its assignment folder) is named as its own cause first, at
its edited line in the file its binding lives in, no second diagnosis at 0.5 or more, and the reference is clean.
Quick mode: the CS231n pack's 27 mutants and its reference, 28 checks (a median of ~20 s each on a
shared, loaded two-core machine, 2026-12-07)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from harness.cli.main import main
from mutants import packs


@pytest.mark.slow
@pytest.mark.parametrize("name", packs.names())     # the added packs (block, built in: test_selftest.py)
def test_selftest_of_a_pack_names_every_mutant_at_its_line_and_the_reference_clean(name):
    r = CliRunner().invoke(main, ["selftest", "--assignment", name, "--quick", "--json"])
    text = getattr(r, "stdout", r.output)
    data = json.loads(text[text.index("{"):])
    s, rows = data["summary"], data["rows"]
    assert {row["case"] for row in rows if row["expected"]} == {m.id for m in packs.of_pack(name)}
    bad = [(row["case"], row["expected"], row["top"], row["others"]) for row in rows
           if not row["ok"] or row["second_strong"]]
    assert not bad, bad
    assert s["mutants"] == s["top1_correct"] == len(packs.of_pack(name)) and s["false_alarms"] == 0
    assert s["correct_cases"] >= 1 and s["passed"] and r.exit_code == 0
    off = [(row["case"], row["file"], row["line"], row["bug_file"], row["bug_lines"]) for row in rows
           if row["expected"] and not row["line_ok"]]
    assert not off, off
