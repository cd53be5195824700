"""The corpus's bars (issue 11's done-when) through real checks in warm workers; the manifest's fast tests: tests/unit/test_corpus.py."""
from __future__ import annotations

import json
import pytest
from click.testing import CliRunner
from harness.cli.main import main

from test_corpus import CORPUS, bench, corpus_scores  # noqa: F401, F811 (fixtures, helpers)


@pytest.mark.slow
@pytest.mark.sweep
@pytest.mark.parametrize("split", bench.SPLITS + ("all",))
def test_issue_11_done_when(corpus_scores, split):
    s = corpus_scores[split]
    assert not bench.done_when_failures(s), bench.table(corpus_scores) + "\n" + bench.failures_text(s)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["adamw_lambdalr_clip.py", "onecycle_bf16_autocast.py"])
def test_standard_schedulers_and_autocast_are_not_tampering(tmp_path, name):
    """Issue 11: AdamW + LambdaLR + clipping and OneCycleLR + bf16 autocast are correct code, not cheating."""
    out = tmp_path / "r.json"
    res = CliRunner().invoke(main, ["check", str(CORPUS / "reversal" / "correct" / name), "--quick",
                                    "--json", str(out), "--html", str(tmp_path / "r.html")])
    result = json.loads(out.read_text())
    assert [d["id"] for d in result["diagnoses"]] == [], res.output
    assert res.exit_code == 0, res.output
    # the training loop was really traced: the scheduler's lr and the clipped gradients were measured
    checks = {c["id"]: c["status"] for c in result["checks"]}
    assert checks["lr-schedule"] == "pass" and checks["train-zero-grad"] == "pass"
