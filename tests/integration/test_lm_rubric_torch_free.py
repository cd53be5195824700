"""Scoring lm (harness/grading/rubric_lm.py) and writing its Gradescope results happen in the grader's process, which
never imports torch: checked in a fresh interpreter."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_lm_rubric_components import lm_result

ROOT = Path(__file__).resolve().parents[2]


def test_scoring_lm_does_not_import_torch():
    code = ("import json, sys\nfrom harness.grading import rubric, gradescope\n"
            f"r = json.loads({json.dumps(json.dumps(lm_result(failing=('rope',))))})\n"
            "g = rubric.score(r, rubric.load())\ngradescope.gradescope_results(r, g)\n"
            "assert 'torch' not in sys.modules, 'torch imported to score lm'\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
