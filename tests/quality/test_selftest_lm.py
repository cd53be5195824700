"""The lm self-test's bar: every lm mutant names its component, through real checks."""
from __future__ import annotations

import json
import pytest
from click.testing import CliRunner
from harness.cli.main import main


@pytest.mark.slow
def test_selftest_lm_every_mutant_names_its_component(tmp_path):
    r = CliRunner().invoke(main, ["selftest", "--assignment", "lm", "--quick", "--json"])
    text = getattr(r, "stdout", r.output)
    data = json.loads(text[text.index("{"):])
    s = data["summary"]
    bad = [(row["case"], row["top"]) for row in data["rows"] if not row["ok"]]
    assert s["top1_correct"] == s["mutants"] and s["false_alarms"] == 0, bad
    assert s["cause_top1"] == s["mutants"], bad
    # the reported line is a mutated line for every mutant (lm-rope-sin-cos-swapped too: right values under
    # each other's names, located where the table named cos is made from sin, not where it is used)
    off = sorted(row["case"] for row in data["rows"] if row.get("line_ok") is False)
    assert off == [], off
