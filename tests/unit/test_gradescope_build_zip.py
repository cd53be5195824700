"""`mtxdiag gradescope build`, in-process: the lm zip (setup.sh installs lm's allowed packages and the pinned CPU
torch, run_autograder grades the submission as lm, rubric.toml holds the per-component [lm] table) and the
messages for bad input (an unknown assignment, an --out that exists, is a folder or cannot be written). Running
the zip's run_autograder on a stand-in of /autograder: tests/integration/test_gradescope_build.py."""
from __future__ import annotations

import stat
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness import allowed
from harness.grading import rubric
from harness.cli.main import main
from harness.grading.gradescope_build import BuildError, build, torch_pin


def _build(*args) -> object:
    return CliRunner().invoke(main, ["gradescope", "build", *args])


@pytest.fixture(scope="module")
def lm_zip(tmp_path_factory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("zip") / "autograder.zip"
    res = _build("--assignment", "lm", "--out", str(out))
    assert res.exit_code == 0, res.output
    return zipfile.ZipFile(out)


def test_the_lm_zip_holds_the_project_and_executable_scripts(lm_zip):
    names = set(lm_zip.namelist())
    assert {"setup.sh", "run_autograder", "rubric.toml", "mtxdiag/pyproject.toml", "mtxdiag/harness/grading/rubric_lm.py",
            "mtxdiag/harness/lm_table.py", "mtxdiag/reference_model/lm.py",
            "mtxdiag/reference_model/lm_adapters.py"} <= names
    for exe in ("setup.sh", "run_autograder"):
        assert (lm_zip.getinfo(exe).external_attr >> 16) & stat.S_IXUSR


def test_setup_installs_lms_packages_and_the_pinned_cpu_torch(lm_zip):
    setup = lm_zip.read("setup.sh").decode()
    assert f'install torch=={torch_pin()} --index-url https://download.pytorch.org/whl/cpu' in setup
    assert '"$ROOT/source/mtxdiag"' in setup and 'ROOT="${AUTOGRADER_ROOT:-/autograder}"' in setup
    assert 'VENV="${MTXDIAG_VENV:-/opt/mtxdiag-venv}"' in setup
    extras = next(line for line in setup.splitlines() if line.startswith('"${PIP[@]}" install ')
                  and "torch" not in line and "mtxdiag" not in line)
    assert set(allowed.allowed("lm")) == set(extras.split()[2:])
    assert {"einops", "jaxtyping"} <= set(allowed.allowed("lm"))     # what the reversal zip does not install


def test_run_autograder_grades_the_submission_as_lm(lm_zip):
    script = lm_zip.read("run_autograder").decode()
    assert "--assignment lm " in script and '--submission-dir "$ROOT/submission"' in script
    assert '--rubric "$ROOT/source/rubric.toml"' in script and "reversal" not in script
    assert "tests/adapters.py" in script                # says what the submission is


def test_the_shipped_rubric_is_lms_per_component_table(lm_zip):
    shipped = rubric.parse(lm_zip.read("rubric.toml").decode(), "rubric.toml")
    assert shipped.lm == rubric.load().lm and shipped.lm["max_score"] == 100
    assert set(shipped.lm["components"]) >= {"rope", "adamw", "get-batch", "mha-rope"}


def test_a_rubric_without_lm_table_ships_with_the_default_one(tmp_path):
    own = tmp_path / "mine.toml"
    own.write_text('name = "mine"\nmax_score = 50\n[causes]\nsoftmax-wrong-dim = 7\n')
    build("lm", tmp_path / "a.zip", rubric_path=own)
    text = zipfile.ZipFile(tmp_path / "a.zip").read("rubric.toml").decode()
    shipped = rubric.parse(text)
    assert text.startswith(own.read_text()) and shipped.causes == {"softmax-wrong-dim": 7.0}
    assert shipped.lm == rubric.load().lm
    # an instructor's own [lm] table ships as written; the other assignments' rubric is never edited
    custom = rubric.DEFAULT_PATH.read_text().replace("rope = 10", "rope = 12").replace("sdpa = 8", "sdpa = 6")
    own.write_text(custom)
    build("lm", tmp_path / "b.zip", rubric_path=own)
    assert zipfile.ZipFile(tmp_path / "b.zip").read("rubric.toml").decode() == custom
    own.write_text('name = "mine"\nmax_score = 50\n')
    build("reversal", tmp_path / "c.zip", rubric_path=own)
    assert zipfile.ZipFile(tmp_path / "c.zip").read("rubric.toml").decode() == own.read_text()


def test_an_existing_out_is_kept_unless_force(tmp_path):
    out = tmp_path / "autograder.zip"
    out.write_bytes(b"someone's work")
    for assignment in ("lm", "reversal"):
        res = _build("--assignment", assignment, "--out", str(out))
        assert res.exit_code == 2 and "already exists" in res.output and "--force" in res.output, res.output
        assert out.read_bytes() == b"someone's work"
    res = _build("--assignment", "lm", "--out", str(out), "--force")
    assert res.exit_code == 0, res.output
    assert "--assignment lm " in zipfile.ZipFile(out).read("run_autograder").decode()
    assert [p.name for p in tmp_path.iterdir()] == ["autograder.zip"]       # no temporary left


def test_bad_assignment_and_unwritable_out_say_why(tmp_path):
    res = _build("--assignment", "lmx", "--out", str(tmp_path / "a.zip"))
    assert res.exit_code == 2 and "'reversal', 'block', 'lm'" in res.output
    with pytest.raises(BuildError, match="unknown assignment 'gpt'.*reversal, block, lm"):
        build("gpt", tmp_path / "a.zip")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    res = _build("--assignment", "lm", "--out", str(blocker / "sub" / "a.zip"))
    assert res.exit_code == 2 and "cannot write" in res.output and "not a folder" in res.output, res.output
    with pytest.raises(BuildError, match="is a folder"):
        build("lm", tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_unreadable_rubric_fails_before_anything_is_written(tmp_path):
    res = _build("--assignment", "lm", "--out", str(tmp_path / "a.zip"), "--rubric", str(tmp_path / "none.toml"))
    assert res.exit_code == 2 and "cannot read the rubric" in res.output
    assert not list(tmp_path.iterdir())


def test_reversal_zip_still_grades_reversal(tmp_path):
    build("reversal", tmp_path / "r.zip", quick=True)
    z = zipfile.ZipFile(tmp_path / "r.zip")
    assert "--assignment reversal " in z.read("run_autograder").decode()
    assert "einops" not in z.read("setup.sh").decode() and "tqdm" in z.read("setup.sh").decode()
    assert Path(rubric.DEFAULT_PATH).read_bytes() == z.read("rubric.toml")
