"""`mtxdiag gradescope run ZIP SUBMISSION`: the reversal zip (--quick) run as Gradescope runs it, on a stand-in
of /autograder, gives a results.json in Gradescope's format for a correct submission (full marks), an exported
mutant (less), a file that does not parse and an empty upload (0, with the reason in the output). Setup is
skipped here (--no-setup: this interpreter, the zip's mtxdiag/ on PYTHONPATH); setup.sh is checked by `bash -n`,
and run for real in the slow test. A zip whose run_autograder writes nothing, or a malformed results.json,
exits 1 with the violation named."""
from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from harness.grading import gradescope_schema, rubric

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, MTXDIAG_DAEMON="0")


@pytest.fixture(scope="module")
def reversal_zip(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("zip") / "autograder.zip"
    r = subprocess.run([sys.executable, "-m", "harness", "gradescope", "build", "--assignment", "reversal",
                        "--quick", "--out", str(out)], capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def _run(zip_path: Path, submission: Path, keep: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    r = subprocess.run([sys.executable, "-m", "harness", "gradescope", "run", str(zip_path), str(submission),
                        "--keep", str(keep), *extra], capture_output=True, text=True, cwd=ROOT, env=ENV,
                       timeout=900)
    path = keep / "results" / "results.json"
    data = json.loads(path.read_text()) if path.is_file() else {}
    return r, data


def _valid(r: subprocess.CompletedProcess, keep: Path) -> None:
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert gradescope_schema.violations((keep / "results" / "results.json").read_bytes()) == []
    assert "results.json: valid" in r.stdout and (keep / "results" / "stdout").is_file()
    assert {"source", "submission", "results", "run_autograder"} <= {p.name for p in keep.iterdir()}


def test_scripts_are_valid_bash(reversal_zip, tmp_path):
    z = zipfile.ZipFile(reversal_zip)
    for name in ("setup.sh", "run_autograder"):
        (tmp_path / name).write_bytes(z.read(name))
        r = subprocess.run(["bash", "-n", str(tmp_path / name)], capture_output=True, text=True)
        assert r.returncode == 0, (name, r.stderr)


def test_a_correct_submission_gets_full_marks(reversal_zip, tmp_path):
    keep = tmp_path / "ag"
    r, res = _run(reversal_zip, ROOT / "submissions" / "reversal_lesson.py", keep, "--no-setup")
    _valid(r, keep)
    top = rubric.load().max_score
    assert res["score"] == top == gradescope_schema.max_score(res) and res["extra_data"]["verdict"] == "clean"
    assert f"score: {top:g} / {top:g}" in r.stdout and "setup: skipped" in r.stdout
    assert (keep / "submission" / "reversal_lesson.py").is_file()


def test_an_exported_mutant_loses_points(reversal_zip, tmp_path):
    subprocess.run([sys.executable, "-m", "harness", "mutants", "export", str(tmp_path / "export"),
                    "--assignment", "reversal"], check=True, capture_output=True, cwd=ROOT, env=ENV, timeout=300)
    manifest = json.loads((tmp_path / "export" / "manifest.json").read_text())      # file name -> mutant
    name = next(f for f, m in manifest.items() if m["id"] == "reversal-softmax-wrong-dim")
    keep = tmp_path / "ag"
    r, res = _run(reversal_zip, tmp_path / "export" / name, keep, "--no-setup")
    _valid(r, keep)
    assert 0 <= res["score"] < rubric.load().max_score and res["extra_data"]["verdict"] == "problems"
    assert "softmax-wrong-dim" in res["output"]


def test_a_file_that_does_not_parse_scores_zero_with_the_reason(reversal_zip, tmp_path):
    sub = tmp_path / "model.py"
    sub.write_text("import torch\nclass MiniTransformer(torch.nn.Module)\n    pass\n")
    keep = tmp_path / "ag"
    r, res = _run(reversal_zip, sub, keep, "--no-setup")
    _valid(r, keep)
    assert res["score"] == 0, res["output"]
    assert "syntax" in res["output"].lower() or "SyntaxError" in json.dumps(res), res["output"]


def test_an_empty_upload_scores_zero_with_the_reason(reversal_zip, tmp_path):
    (tmp_path / "empty").mkdir()
    keep = tmp_path / "ag"
    r, res = _run(reversal_zip, tmp_path / "empty", keep, "--no-setup")
    _valid(r, keep)
    assert res["score"] == 0 and "no .py or .ipynb" in res["output"].lower(), res["output"]


def _fake_zip(path: Path, run_autograder: str) -> Path:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("setup.sh", "#!/usr/bin/env bash\nexit 0\n")
        z.writestr("run_autograder", run_autograder)
    path.write_bytes(buf.getvalue())
    return path


@pytest.mark.parametrize("script, message", [
    ('echo "grading..."\n', "wrote no results/results.json"),
    ('echo \'{"score": 1, "max_score": 2}\' > "$AUTOGRADER_ROOT/results/results.json"\n',
     "max_score is not a top-level key"),
    ('echo \'{"score": NaN}\' > "$AUTOGRADER_ROOT/results/results.json"\n', "not valid JSON"),
])
def test_a_missing_or_malformed_results_json_exits_1_and_says_why(tmp_path, script, message):
    zip_path = _fake_zip(tmp_path / "fake.zip", "#!/usr/bin/env bash\n" + script)
    (tmp_path / "sub.py").write_text("x = 1\n")
    r = subprocess.run([sys.executable, "-m", "harness", "gradescope", "run", str(zip_path), str(tmp_path / "sub.py"),
                        "--no-setup"], capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=120)
    assert r.returncode == 1 and message in r.stdout, r.stdout + r.stderr
    assert "grading..." in r.stdout or "results.json: 1 problem" in r.stdout


def test_bad_input_exits_2(tmp_path):
    (tmp_path / "not.zip").write_text("x")
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "mine.txt").write_text("someone's")
    cases = [([str(tmp_path / "not.zip"), str(tmp_path)], "not a readable zip"),
             ([str(tmp_path / "none.zip"), str(tmp_path)], "no zip at"),
             ([str(_fake_zip(tmp_path / "f.zip", "")), str(tmp_path / "nothing")], "no submission at"),
             ([str(tmp_path / "f.zip"), str(tmp_path / "not.zip"), "--keep", str(tmp_path / "keep")],
              "not an empty folder")]
    for args, message in cases:
        r = subprocess.run([sys.executable, "-m", "harness", "gradescope", "run", *args], capture_output=True,
                           text=True, cwd=ROOT, env=ENV, timeout=120)
        assert r.returncode == 2 and message in r.stderr, (args, r.stderr)
    assert [p.name for p in (tmp_path / "keep").iterdir()] == ["mine.txt"]


@pytest.mark.slow
def test_setup_installs_the_zip_into_a_venv_and_it_grades(reversal_zip, tmp_path):
    """setup.sh for real (local mode: a --system-site-packages venv, nothing downloaded that is installed here),
    then run_autograder with the venv's own mtxdiag."""
    keep = tmp_path / "ag"
    r, res = _run(reversal_zip, ROOT / "submissions" / "reversal_lesson.py", keep)
    _valid(r, keep)
    assert "setup: done" in r.stdout and res["score"] == rubric.load().max_score
    where = subprocess.check_output([str(keep / "venv" / "bin" / "python"), "-c",
                                     "import harness; print(harness.__file__)"], text=True, cwd=tmp_path).strip()
    assert where.startswith(str(keep / "venv")), where


def test_extra_files_visibility_and_points_reach_the_results(tmp_path):
    """A zip built with --files (a data file and a helper module), a rubric's [visibility] and --points 50: the
    student's code reads the file and imports the module in its sandboxed run folder (a clean check, full marks),
    and results.json is valid, out of exactly 50, with the declared visibilities."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "vocab.txt").write_text("13\n")
    (tmp_path / "course_helpers.py").write_text("VOCAB_SIZE = 13\n")
    own = tmp_path / "rubric.toml"
    own.write_text(rubric.DEFAULT_PATH.read_text() + '\n[visibility]\ndefault = "after_due_date"\n'
                   'overall = "visible"\nchecks = "hidden"\n')
    out = tmp_path / "extras.zip"
    r = subprocess.run([sys.executable, "-m", "harness", "gradescope", "build", "--assignment", "reversal", "--quick",
                        "--out", str(out), "--rubric", str(own), "--points", "50", "--files", str(tmp_path / "data"),
                        "--files", str(tmp_path / "course_helpers.py")], capture_output=True, text=True, cwd=ROOT, env=ENV,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    text = (ROOT / "submissions" / "reversal_lesson.py").read_text()
    old = "        super().__init__()\n        self.d_model = d_model\n        self.src_emb"
    assert text.count(old) == 1
    sub = tmp_path / "model.py"
    sub.write_text(text.replace(old, "        super().__init__()\n"
                                     "        from course_helpers import VOCAB_SIZE   # the instructor's module\n"
                                     "        with open('data/vocab.txt') as f:        # the instructor's data\n"
                                     "            assert int(f.read()) == VOCAB_SIZE == VOCAB\n"
                                     "        self.d_model = d_model\n        self.src_emb"))
    keep = tmp_path / "ag"
    r, res = _run(out, sub, keep, "--no-setup")
    _valid(r, keep)
    assert res["extra_data"]["verdict"] == "clean", res["output"]
    assert res["score"] == 50 == gradescope_schema.max_score(res) and "score: 50 / 50" in r.stdout
    assert math.fsum(t["max_score"] for t in res["tests"]) == 50
    assert res["visibility"] == "after_due_date"
    summary = [t for t in res["tests"] if "summary" in t["tags"]]
    checks = [t for t in res["tests"] if "check" in t["tags"]]
    assert [t["visibility"] for t in summary] == ["visible"] and summary[0]["max_score"] == 50
    assert checks and {t["visibility"] for t in checks} == {"hidden"}
    assert not (keep / "submission" / "data").exists()          # copied into the run folder, not the upload
