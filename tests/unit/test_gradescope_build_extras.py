"""`gradescope build --files/--requirements/--points`, in-process: the extra files ship under files/ and
run_autograder hands them to every run (the runner copies them beside the submission, which a spec shows the
child only as "."); a requirements file ships with torch held at the pin by constraints.txt; --points reaches
run_autograder. What cannot ship is refused before anything is written: a path that is not there, a link, a name
the run folder uses, two of one name, too much, and requirement lines the container cannot install."""
from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli.main import main
from harness.grading import gradescope_extras
from harness.grading.gradescope_build import BuildError, build, torch_pin
from harness.isolation import support_files
from harness.protocol import CheckSpec


def _build(*args) -> object:
    return CliRunner().invoke(main, ["gradescope", "build", *map(str, args)])


@pytest.fixture
def data(tmp_path) -> Path:
    (tmp_path / "vocab.txt").write_text("13\n")
    (tmp_path / "course").mkdir()
    (tmp_path / "course" / "helpers.py").write_text("X = 1\n")
    (tmp_path / "course" / "sub").mkdir()
    (tmp_path / "course" / "sub" / "table.csv").write_text("a,b\n")
    return tmp_path


def test_files_ship_under_files_and_run_autograder_passes_them(data, tmp_path):
    out = tmp_path / "out" / "a.zip"
    res = _build("--assignment", "reversal", "--out", out, "--files", data / "vocab.txt", "--files",
                 data / "course", "--points", "50")
    assert res.exit_code == 0 and "files/" in res.output, res.output
    z = zipfile.ZipFile(out)
    assert {"files/vocab.txt", "files/course/helpers.py", "files/course/sub/table.csv"} <= set(z.namelist())
    assert z.read("files/vocab.txt") == b"13\n"
    script = z.read("run_autograder").decode()
    assert '--files-dir "$ROOT/source/files"' in script and "--points 50 " in script
    assert "--visibility " not in script          # the rubric's [visibility], else visible
    plain = build("reversal", tmp_path / "plain.zip")
    assert not any(n.startswith("files/") for n in plain)
    assert "--files-dir" not in zipfile.ZipFile(tmp_path / "plain.zip").read("run_autograder").decode()


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "none.txt", "does not exist"),
    (lambda d: (d / "submission.py").write_text("x") and d / "submission.py", "'submission.py' is the submission's"),
    (lambda d: (d / "repo").mkdir() or d / "repo", "'repo' is the submission's"),
    (lambda d: os.symlink(d / "vocab.txt", d / "link.txt") or d / "link.txt", "is a link"),
])
def test_what_cannot_ship_is_refused_before_anything_is_written(data, tmp_path, make, message):
    path = make(data)
    res = _build("--assignment", "reversal", "--out", tmp_path / "a.zip", "--files", path)
    assert res.exit_code == 2 and message in res.output, res.output
    assert not (tmp_path / "a.zip").exists()


def test_a_clash_a_link_inside_and_too_much_are_refused(data, tmp_path, monkeypatch):
    (data / "other").mkdir()
    (data / "other" / "vocab.txt").write_text("14\n")
    with pytest.raises(BuildError, match="have the same name 'vocab.txt'"):
        build("reversal", tmp_path / "a.zip", files=[data / "vocab.txt", data / "other" / "vocab.txt"])
    os.symlink("/etc/passwd", data / "course" / "sub" / "secret")
    with pytest.raises(BuildError, match="secret is a link"):
        build("reversal", tmp_path / "a.zip", files=[data / "course"])
    (data / "course" / "sub" / "secret").unlink()
    monkeypatch.setattr(support_files, "SUPPORT_MB", 0)
    with pytest.raises(BuildError, match="more than 0 MB in all"):
        build("reversal", tmp_path / "a.zip", files=[data / "course"])
    monkeypatch.setattr(support_files, "SUPPORT_MB", 32)
    monkeypatch.setattr(support_files, "SUPPORT_FILES", 1)
    with pytest.raises(BuildError, match="more than 1 files in all"):
        build("reversal", tmp_path / "a.zip", files=[data / "course"])
    assert not (tmp_path / "a.zip").exists()


def test_the_runner_copies_them_beside_the_submission_and_the_child_sees_only_a_mark(data, tmp_path):
    build("reversal", tmp_path / "a.zip", files=[data / "vocab.txt", data / "course"])
    (tmp_path / "src").mkdir()
    zipfile.ZipFile(tmp_path / "a.zip").extractall(tmp_path / "src")
    work = tmp_path / "work"
    work.mkdir()
    (work / "submission.py").write_text("student")
    names = support_files.copy_into(tmp_path / "src" / "files", work)
    assert sorted(names) == ["course/helpers.py", "course/sub/table.csv", "vocab.txt"]
    assert (work / "vocab.txt").read_text() == "13\n" and (work / "submission.py").read_text() == "student"
    spec = CheckSpec("/x/model.py", support=str(tmp_path / "src" / "files"))
    child = spec.for_child(str(work / "submission.py"), "none")
    assert child.support == "." and str(tmp_path / "src") not in " ".join(child.to_argv())
    assert CheckSpec.from_argv(child.to_argv() + ["--result-fd", "3"]) == child
    assert CheckSpec("/x/model.py").for_child("/w/submission.py", "none").support == ""
    (tmp_path / "src" / "files" / "stack.txt").write_text("x")       # a zip edited by hand: the run refuses it
    with pytest.raises(support_files.SupportError, match="'stack.txt'"):
        support_files.copy_into(tmp_path / "src" / "files", work)


def test_requirements_ship_with_torch_held_at_its_pin(tmp_path):
    req = tmp_path / "req.txt"
    req.write_text("# course packages\nscipy>=1.10,<2  # stats\npandas[excel] ==2.2.*; python_version >= '3.10'\n"
                   "sentencepiece \\\n  ~=0.2\nmylib @ https://example.org/mylib-1.0.tar.gz\n")
    names = build("lm", tmp_path / "a.zip", requirements=req)
    assert {"requirements.txt", "constraints.txt"} <= set(names)
    z = zipfile.ZipFile(tmp_path / "a.zip")
    assert z.read("requirements.txt") == req.read_bytes()
    assert z.read("constraints.txt").decode() == f"torch=={torch_pin()}\n"
    setup = z.read("setup.sh").decode().splitlines()
    line = '"${PIP[@]}" install -r "$ROOT/source/requirements.txt" -c "$ROOT/source/constraints.txt"'
    assert setup[-1] == line and setup.index(line) > next(i for i, s in enumerate(setup) if "source/mtxdiag" in s)
    build("lm", tmp_path / "b.zip")
    assert "requirements.txt" not in zipfile.ZipFile(tmp_path / "b.zip").read("setup.sh").decode()


@pytest.mark.parametrize("line, message", [
    ("-e git+https://x/y.git#egg=y", "editable install needs its source"),
    ("-r more.txt", "the other file is not in the zip"),
    ("--index-url https://example.org/simple", "pip options"),
    ("./vendor/pkg", "local path"),
    ("/opt/wheels/x-1.0-py3-none-any.whl", "local path"),
    ("x @ file:///tmp/x", "local path"),
    ("https://example.org/x.tar.gz", "bare URL"),
    ("x-1.0-py3-none-any.whl", "local path"),
    ("https://example.org/x", "bare URL"),
    ("torch==2.0", "installs torch at the grader's pin"),
    ("Torch", "installs torch"),
    ("numpy >= ", "not a requirement"),
    ("", "holds no requirement"),
])
def test_requirement_lines_the_container_cannot_install_are_refused(tmp_path, line, message):
    req = tmp_path / "req.txt"
    req.write_text("numpy\n" + line + "\n" if line else "# nothing\n")
    with pytest.raises(gradescope_extras.ExtrasError, match="req.txt") as e:
        gradescope_extras.requirements(req)
    assert message in str(e.value)
    res = _build("--assignment", "reversal", "--out", tmp_path / "a.zip", "--requirements", req)
    assert res.exit_code == 2 and message in res.output and not (tmp_path / "a.zip").exists()
