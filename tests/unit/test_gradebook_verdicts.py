"""The gradebook's table and its counts agree: a submission that could not be checked (an error, or a syntax
error whose result says `problems`) reads "could not be checked" in its row as in the card that counts it.
Built from hand-made results: no check runs."""
from __future__ import annotations

import re
from pathlib import Path

from harness.causes import BY_ID
from harness.grading import gradebook, rubric


def _result(verdict, causes=(), error=None):
    diags = [{"id": c, "title": BY_ID[c].title, "confidence": 1.0, "evidence": [f"{c}: x"], "fix": "",
              "location": None, "why": ""} for c in causes]
    r = {"verdict": verdict, "diagnoses": diags, "error": error, "checks": [], "timings": {"total_s": 1.0}}
    r["grade"] = rubric.score(r, rubric.load())
    return r


def test_a_syntax_error_reads_could_not_be_checked_in_the_table_and_the_count():
    results = {"ann": _result("clean"), "ben": _result("problems", ["causal-mask-missing"]),
               "cat": _result("problems", ["syntax-error"]),
               "dan": _result("error", ["timeout"], {"kind": "timeout", "reason": "did not finish",
                                                     "phase": "load", "student_fault": True})}
    rows = [gradebook.row_from_result(s, r, Path("/nonexistent")) for s, r in results.items()]
    assert results["cat"]["verdict"] == "problems"                     # the result's, kept in the CSV
    assert "cat,0,100,problems" in gradebook.csv_text(rows)
    html = gradebook.html_text(rows)
    cells = {s: v for v, s in re.findall(r'<tr data-verdict="([^"]+)"[^>]*>\s*<td data-value="(\w+)"', html)}
    assert cells == {"ann": "clean", "ben": "problems", "cat": "not-checked", "dan": "not-checked"}
    shown = re.findall(r'class="v-[\w-]+">([^<]+)</td>', html)
    st = gradebook.stats(rows)
    assert st["stopped"] == shown.count("could not be checked") == 2
    assert st["with_problems"] == shown.count("problems") == 1
    assert f'<b class="v-error">{st["stopped"]}</b>could not be checked' in html
    assert f'<b class="v-problems">{st["with_problems"]}</b>with problems' in html
    assert '<option value="not-checked">could not be checked</option>' in html     # the filter says the same
