"""`mtxdiag gradescope build` writes an autograder zip whose run_autograder, run against a local stand-in of
Gradescope's container layout (/autograder/{source,submission,results}), writes a results.json with a test
per finding and per check, their visibility and the output (issue 27 item 2). The lm zip grades a student's
repository per component: the bundled example at full marks, an exported mutant losing its own component only."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

import mutants
from harness.cli.main import main
from harness.grading import rubric
from harness.grading.grade import GradeError, gradescope_one
from harness.grading.rubric_lm import canonical

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def autograder(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("zip")
    res = CliRunner().invoke(main, ["gradescope", "build", "--assignment", "reversal", "--quick",
                                    "--out", str(d / "autograder.zip")])
    assert res.exit_code == 0, res.output
    return d / "autograder.zip"


def test_the_zip_holds_what_gradescope_needs(autograder):
    z = zipfile.ZipFile(autograder)
    names = set(z.namelist())
    assert {"setup.sh", "run_autograder", "rubric.toml", "mtxdiag/pyproject.toml",
            "mtxdiag/harness/cli/main.py", "mtxdiag/harness/grading/rubric_default.toml",
            "mtxdiag/harness/report/templates/report.html", "mtxdiag/reference_model/reversal.py"} <= names
    setup = z.read("setup.sh").decode()
    assert "--index-url https://download.pytorch.org/whl/cpu" in setup and " torch==" in setup
    assert '"$ROOT/source/mtxdiag"' in setup and "tqdm" in setup
    for exe in ("setup.sh", "run_autograder"):
        assert (z.getinfo(exe).external_attr >> 16) & stat.S_IXUSR


def _run(autograder: Path, root: Path, files: dict, repo: Path | None = None,
         under: str = "") -> tuple[subprocess.CompletedProcess, dict]:
    """run_autograder on a stand-in of /autograder: `files` (name -> text) or a repository copied into the
    submission folder (at its root, or in the folder `under`, as an uploaded zip of the folder would be)."""
    src = root / "source"
    zipfile.ZipFile(autograder).extractall(src)
    (root / "submission").mkdir()
    for name, text in files.items():
        (root / "submission" / name).write_text(text)
    if repo is not None:
        shutil.copytree(repo, root / "submission" / under, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    (root / "results").mkdir()
    (root / "results" / "results.json").write_text('{"score": 100, "stale": true}')   # a previous run's
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), MTXDIAG_CMD=f"{sys.executable} -m harness",
               PYTHONPATH=str(src / "mtxdiag"), MTXDIAG_DAEMON="0")
    proc = subprocess.run(["bash", str(src / "run_autograder")], capture_output=True, text=True, timeout=600,
                          cwd=root, env=env)
    return proc, json.loads((root / "results" / "results.json").read_text())


def test_run_autograder_grades_a_buggy_submission(autograder, tmp_path):
    text = mutants.source(mutants.get("reversal-softmax-wrong-dim"))
    proc, res = _run(autograder, tmp_path / "autograder", {"model.py": text})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "stale" not in res
    assert res["score"] < 100 and res["visibility"] == "visible" and res["stdout_visibility"] == "hidden"
    failed = [t for t in res["tests"] if t["status"] == "failed" and "cause" in t.get("tags", [])]
    assert failed and failed[0]["name"].endswith("[softmax-wrong-dim]"), [t["name"] for t in res["tests"]]
    assert failed[0]["max_score"] > 0 and "How to fix it:" in failed[0]["output"]
    checks = [t for t in res["tests"] if t["name"].startswith("check: ")]
    assert len(checks) > 10 and all(t["visibility"] == "visible" for t in res["tests"])
    assert "softmax-wrong-dim" in res["output"]
    assert res["extra_data"]["verdict"] == "problems"


def test_two_files_is_the_students_zero_with_a_reason(autograder, tmp_path):
    proc, res = _run(autograder, tmp_path / "autograder", {"a.py": "x = 1\n", "b.py": "y = 2\n"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert res["score"] == 0 and "must hold exactly one" in json.dumps(res)


def test_gradescope_clears_a_previous_results_file(tmp_path):
    results = tmp_path / "results.json"
    results.write_text('{"score": 100}')
    with pytest.raises(GradeError):
        gradescope_one(tmp_path / "no-such-folder", results)
    assert not results.exists()


@pytest.fixture(scope="module")
def lm_autograder(tmp_path_factory) -> Path:
    """The lm zip as an instructor builds it (a full check: the brief training runs too)."""
    d = tmp_path_factory.mktemp("lmzip")
    res = CliRunner().invoke(main, ["gradescope", "build", "--assignment", "lm", "--out", str(d / "autograder.zip")])
    assert res.exit_code == 0, res.output
    return d / "autograder.zip"


def _components(res: dict) -> dict:
    tests = [t for t in res["tests"] if "lm-component" in t.get("tags", [])]
    assert len(tests) == 17 and all(t["output_format"] == "md" and t["visibility"] == "visible" for t in tests)
    return {t["name"].split()[1]: t for t in tests}       # "08 rope (run_rope)" -> rope


def test_lm_zip_gives_the_example_repository_full_marks(lm_autograder, tmp_path):
    proc, res = _run(lm_autograder, tmp_path / "autograder", {}, repo=ROOT / "submissions" / "lm_example")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "stale" not in res and res["score"] == res["extra_data"]["max_score"] == 100, res["output"]
    comps = _components(res)
    assert all(t["status"] == "passed" and t["score"] == t["max_score"] > 0 for t in comps.values())
    assert sum(t["max_score"] for t in comps.values()) == 100 and res["extra_data"]["verdict"] == "clean"


def test_lm_zip_charges_an_exported_mutant_on_its_own_component_only(lm_autograder, tmp_path):
    m = mutants.get_any("lm-rope-halves-not-pairs")
    mutants.export_submissions(tmp_path / "export", [m])
    proc, res = _run(lm_autograder, tmp_path / "autograder", {}, repo=tmp_path / "export" / "submission_01",
                     under="my-cs336-repo")            # the repository one folder down, as a zip upload holds it
    assert proc.returncode == 0, proc.stderr[-3000:]
    comp = canonical(m.component)
    points = rubric.load().lm["components"][comp]
    comps = _components(res)
    lost = {name: t["max_score"] - t["score"] for name, t in comps.items() if t["score"] < t["max_score"]}
    assert lost == {comp: points}, (lost, res["output"])
    assert res["score"] == 100 - points and comps[comp]["status"] == "failed"
    assert m.cause in comps[comp]["output"] and "**Where:** `model.py` line" in comps[comp]["output"]
    assert res["extra_data"]["causes"][0] == m.cause
