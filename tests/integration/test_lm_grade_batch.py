"""Grading `lm` end to end (issue 25.1): what `mutants export --assignment lm` writes (repositories and single
files) and correct repositories, graded as one batch with the real checker: every submission scored, no layout
rejection, no crash; correct code at full marks; each mutant loses points on its own component.

A sample of the mutants by default (one per component listed below, each form); MTXDIAG_LM_GRADE_ALL=1 grades
every exported lm mutant in both forms (measured: 112 mutant rows + 4 correct, all as stated, `--quick`).
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import mutants as library
from harness.grading.grade import Grader, Options
from harness.grading.rubric_lm import canonical
from mutants.lm_export import reference_repo_files
from mutants.lm_registry import by_component

ROOT = Path(__file__).resolve().parents[2]
CORRECT = ROOT / "tests" / "corpus" / "lm" / "correct"
AS_REPO = ("rope", "adamw", "lr_schedule", "get_batch")
AS_FILE = ("rmsnorm", "softmax", "cross_entropy", "block")


def _batch(tmp_path: Path) -> tuple[Path, dict]:
    """The submissions folder and {student id: expected component or None for correct code}."""
    every = os.environ.get("MTXDIAG_LM_GRADE_ALL") == "1"
    chosen = list(library.LM_MUTANTS) if every else \
        [by_component(c)[0] for c in AS_REPO] + [by_component(c)[0] for c in AS_FILE]
    export = tmp_path / "export"
    library.export_submissions(export, chosen)
    manifest = json.loads((export / "manifest.json").read_text())
    src, expected = tmp_path / "subs", {}
    src.mkdir()
    for name, entry in manifest.items():
        m = library.get_any(entry["id"])
        repo = name.endswith("/")
        if not every and (m.component in AS_REPO) != repo:
            continue                   # the sample: each component in one form
        student = name.rstrip("/") if repo or every else Path(name).stem    # alone, a file's id is its stem
        if repo:
            shutil.copytree(export / student, src / student)
        else:
            shutil.copyfile(export / name, src / name)
        expected[student] = canonical(m.component)
    for repo in sorted(CORRECT.glob("repo_*")):
        shutil.copytree(repo, src / f"correct_{repo.name}", ignore=shutil.ignore_patterns("__pycache__"))
        expected[f"correct_{repo.name}"] = None
    for rel, text in reference_repo_files().items():
        p = src / "reference" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    expected["reference"] = None
    return src, expected


def test_an_lm_batch_of_repositories_and_files_is_graded_per_component(tmp_path):
    src, expected = _batch(tmp_path)
    out = tmp_path / "out"
    summary = Grader(src, out, options=Options(quick=True, assignment="lm", jobs=2, timeout_s=300),
                     progress=False).run()
    assert summary.problems == [] and summary.grader_faults == []          # no layout rejection, no crash
    rows = {r["student"]: r for r in summary.rows}
    assert set(rows) == set(expected)
    for student, comp in expected.items():
        res = json.loads((out / "students" / student / "result.json").read_text())
        g = res["grade"]
        assert res["verdict"] != "error" and g["score"] is not None, (student, res.get("error"))
        assert res["assignment"] == "lm" and len(g["components"]) == 17
        charged = {b["id"] for b in g["breakdown"] if b["kind"] == "component" and b["charged"]}
        if comp is None:
            assert g["score"] == g["max_score"] == 100, (student, g["breakdown"])
        else:
            assert comp in charged and g["score"] < 100, (student, comp, g["breakdown"])
        gs = json.loads((out / "students" / student / "results.json").read_text())
        assert abs(gs["score"] - g["score"]) < 1e-9 and \
            sum(1 for t in gs["tests"] if "lm-component" in t["tags"]) == 17
    html = (out / "index.html").read_text()
    assert "What to re-teach (lm)" in html and "<code>rope</code>" in html
