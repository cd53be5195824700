"""A notebook's places are named so that a student finds them: the location's "cell" counts every cell from
the top, markdown included (the JSON keeps that), and the terminal and the HTML add the code cell's own number;
a skipped statement's lines are its lines in the cell, not in the flattened text."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from harness.report import html, terminal
from harness.source import code_cell_numbers, read_source

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "tests" / "fixtures" / "correct" / "reversal_notebook_style.ipynb"


def _nb(tmp_path) -> Path:
    nb = tmp_path / "student.ipynb"
    shutil.copy(NOTEBOOK, nb)
    return nb


def _kinds():
    return [c["cell_type"] for c in json.loads(NOTEBOOK.read_text())["cells"]]


def test_code_cell_numbers_skip_markdown():
    kinds = _kinds()
    nums = code_cell_numbers(NOTEBOOK.read_bytes())
    assert kinds[10] == "code" and "markdown" in kinds[:10]
    assert nums[11] == sum(k == "code" for k in kinds[:11]) < 11
    assert all(kinds[n - 1] == "code" for n in nums) and len(nums) == kinds.count("code")
    assert code_cell_numbers(b"x = 1\n") == {}


def test_terminal_html_and_json_name_the_same_cell(tmp_path):
    nb = _nb(tmp_path)
    k = code_cell_numbers(nb.read_bytes())[11]
    loc = {"file": str(nb), "line": 40, "cell": 11, "cell_line": 1}
    result = {"submission": str(nb), "assignment": "reversal", "quick": True, "verdict": "problems",
              "diagnoses": [{"id": "missing-sqrt-dk", "title": "t", "confidence": 0.9, "evidence": ["e"],
                             "fix": "f", "why": "w", "location": loc}],
              "checks": [{"id": "a", "status": "fail", "location": loc}], "timings": {}, "error": None}
    name = f"cell 11 (code cell {k}) line 1"
    assert name in terminal.summary(result, color=False)
    page = html.render(result, source_path=str(nb))
    assert name in page and f"cell 11 (code cell {k}), line 1" in page        # the place and the excerpt's label
    assert result["diagnoses"][0]["location"]["cell"] == 11                   # the JSON: every cell counted
    # the notebook unreadable: still unambiguous about what was counted
    gone = dict(loc, file=str(tmp_path / "elsewhere.ipynb"))
    assert terminal.where(gone) == f"{gone['file']} cell 11 (counting markdown cells) line 1"


def test_skipped_rows_give_the_line_in_the_cell(tmp_path):
    nb = _nb(tmp_path)
    src = read_source(str(nb), nb.read_bytes())
    flat = next(n for n, (c, k) in src.cell_map.items() if c == 14 and k == 2)
    k = code_cell_numbers(nb.read_bytes())[14]
    result = {"submission": str(nb), "skipped_code": [{"line": flat, "end_line": flat + 1, "cell": 14, "code": "x",
                                                       "reason": "r"}]}
    (row,) = html.skipped_rows(result, str(nb))
    assert row["where"] == f"cell 14 (code cell {k}), line 2-3"
