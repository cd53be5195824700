"""Batch grading (issue 6): `mtxdiag grade`, the rubric, the gradebook, resuming, Gradescope, Dask.

Most tests run the grader with a fake checker (milliseconds a submission) so that
the bookkeeping (cache keys, resume, interruption, rubric changes, grader faults)
is tested quickly; the tests that run real child processes use --quick and
submissions that fail fast, and the long ones are marked slow.
"""
from __future__ import annotations

import csv
import io
import json
import math
import shutil
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness import __version__
from harness.grading import gradebook, rubric
from harness.causes import BY_ID
from harness.cli.main import main
from harness.grading.grade import Grader, Options, cache_key, discover, fault_of, gradescope_results

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "reference_model" / "reversal.py"
NOTEBOOK = ROOT / "submissions" / "reversal_lesson.ipynb"

SYNTAX_ERROR = "import torch\nclass MiniTransformer(torch.nn.Module)\n    pass\n"
HANGS = "import time\nclass MiniTransformer:\n    while True:\n        time.sleep(1)\n"
MEMORY_HOG = "import torch\nclass MiniTransformer(torch.nn.Module):\n    x = bytearray(10**11)\n"
EXITS = "import os\nclass MiniTransformer:\n    os._exit(3)\n"

GS_TOP = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
          "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
GS_TEST = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format", "tags",
           "visibility", "extra_data"}
GS_VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}


# --------------------------------------------------------------------------- helpers

def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def assert_gradescope(d: dict) -> None:
    """Gradescope's autograder results.json: field names, types, and the values it accepts."""
    json.dumps(d, allow_nan=False)
    assert isinstance(d, dict) and set(d) <= GS_TOP, set(d) - GS_TOP
    assert _is_number(d["score"])
    if "execution_time" in d:
        assert isinstance(d["execution_time"], int) and d["execution_time"] >= 0
    assert isinstance(d.get("output", ""), str)
    assert d.get("visibility", "visible") in GS_VISIBILITY
    assert d.get("stdout_visibility", "hidden") in GS_VISIBILITY
    assert isinstance(d.get("extra_data", {}), dict)
    assert isinstance(d["tests"], list) and d["tests"]
    for t in d["tests"]:
        assert set(t) <= GS_TEST, set(t) - GS_TEST
        for key in ("name", "score", "max_score", "status", "output", "visibility"):
            assert key in t, (key, t)
        assert isinstance(t["name"], str) and t["name"]
        assert _is_number(t["score"]) and _is_number(t["max_score"]) and 0 <= t["score"] <= t["max_score"]
        assert t["status"] in ("passed", "failed")
        assert isinstance(t["output"], str)
        assert t["visibility"] in GS_VISIBILITY
        assert all(isinstance(x, str) for x in t.get("tags", []))


def read_csv(path: Path, drop=("seconds",)) -> list[dict]:
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    return [{k: v for k, v in r.items() if k not in drop} for r in rows]


def grade_cli(*args):
    return CliRunner().invoke(main, ["grade", *map(str, args)], catch_exceptions=False)


# --------------------------------------------------------------------------- the fake checker

class FakeState:
    def __init__(self):
        self.lock = threading.Lock()
        self.calls: list[str] = []
        self.raise_for: set[str] = set()
        self.interrupt_for: set[str] = set()


FAKE = FakeState()


def _diag(cid: str) -> dict:
    c = BY_ID[cid]
    return {"id": cid, "title": c.title, "confidence": 0.9, "evidence": [f"{cid}: measured 1, expected 0"],
            "fix": c.fix, "location": None, "why": c.why}


def fake_check(path, *, assignment="auto", seed=0, device="cpu", quick=False, limits=None, **_):
    """Stands in for harness.api.check_file: the file's text says what to return ('clean', 'bug ID ...', ...)."""
    path = Path(path)
    student = path.stem
    with FAKE.lock:
        FAKE.calls.append(student)
    if student in FAKE.interrupt_for:
        raise KeyboardInterrupt
    if student in FAKE.raise_for:
        raise RuntimeError("simulated grader bug")
    words = path.read_text().split()
    base = {"schema": 1, "harness_version": __version__, "submission": str(path), "assignment": "reversal",
            "quick": quick, "verdict": "clean", "diagnoses": [], "skipped_code": [], "stdout": "", "stderr": "",
            "artifacts": {}, "timings": {"total_s": 1.5}, "error": None,
            "checks": [{"id": "causal-leak", "status": "pass", "measured": 0.0, "expected": "0", "detail": "",
                        "data": {}, "location": None}]}
    if words[0] == "bug":
        base["diagnoses"] = [_diag(c) for c in words[1:]]
        base["verdict"] = "problems"
        base["checks"][0]["status"] = "fail"
    elif words[0] == "forbidden":       # a correct model that tried operations outside its folder
        base["diagnoses"] = [_diag("forbidden-operation")]
        base["verdict"] = "problems"
        base["checks"].insert(0, {"id": "forbidden-ops", "status": "fail",
                                  "measured": len(words) - 1, "expected": "", "detail": "",
                                  "data": {"ops": sorted(words[1:])}, "location": {"line": 3}})
    elif words[0] == "timeout":
        base.update(verdict="error", diagnoses=[_diag("timeout")],
                    error={"kind": "timeout", "reason": "did not finish within 5 s", "phase": "load",
                           "student_fault": True})
    elif words[0] == "graderfault":
        base.update(verdict="error", diagnoses=[_diag("grader-fault")],
                    error={"kind": "grader-fault", "reason": "could not start the child process",
                           "phase": None, "student_fault": False})
    return base


@pytest.fixture
def fake():
    FAKE.calls.clear()
    FAKE.raise_for.clear()
    FAKE.interrupt_for.clear()
    yield FAKE
    FAKE.raise_for.clear()
    FAKE.interrupt_for.clear()


def make_class(root: Path) -> Path:
    """Five students for the fake checker: files and folders."""
    src = root / "subs"
    src.mkdir()
    (src / "alice.py").write_text("clean")
    (src / "bob.py").write_text("bug causal-mask-missing no-warmup")
    (src / "carol").mkdir()
    (src / "carol" / "carol.py").write_text("bug causal-mask-missing")
    (src / "dave.ipynb").write_text("timeout")
    (src / "erin.py").write_text("bug encoder-in-decode-loop")
    return src


def run_fake(src: Path, out: Path, **opts):
    jobs = opts.pop("jobs", 2)
    rub = opts.pop("rubric", None)
    return Grader(src, out, options=Options(quick=True, jobs=jobs, **opts), rubric=rub, checker=fake_check,
                  progress=False).run()


def test_integrity_has_its_own_column_and_other_rows_are_unchanged(tmp_path, fake):
    """A student whose code tried forbidden operations: flagged in the integrity column (CSV and gradebook,
    filterable), score by the rubric (default: it stands); everyone else's row is what it was without them."""
    src = make_class(tmp_path)
    run_fake(src, tmp_path / "a")
    before = {r["student"]: r for r in read_csv(tmp_path / "a" / "grades.csv")}
    (src / "mallory.py").write_text("forbidden connect read")
    out = tmp_path / "b"
    run_fake(src, out)
    rows = {r["student"]: r for r in read_csv(out / "grades.csv")}
    assert rows["mallory"]["integrity"] == "forbidden: connect, read"
    assert rows["mallory"]["score"] == "100" and rows["mallory"]["causes"] == "forbidden-operation"
    assert {k: v for k, v in rows.items() if k != "mallory"} == before
    assert all(r["integrity"] == "" for k, r in rows.items() if k != "mallory")
    html = (out / "index.html").read_text()
    assert "<button type=\"button\">Integrity</button>" in html and 'id="integrity"' in html
    assert 'data-integrity="flagged"' in html and html.count('data-integrity="ok"') == len(before)
    # an instructor who penalises it says so in the rubric
    strict = tmp_path / "strict.toml"
    strict.write_text(rubric.DEFAULT_PATH.read_text().replace("forbidden-operation = 0", "forbidden-operation = 50"))
    run_fake(src, tmp_path / "c", rubric=rubric.load(strict))
    assert {r["student"]: r for r in read_csv(tmp_path / "c" / "grades.csv")}["mallory"]["score"] == "50"


# --------------------------------------------------------------------------- rubric

def test_default_rubric_lists_every_cause_and_weights_correctness_over_efficiency():
    r = rubric.load()
    assert r.max_score == 100 and r.error_score == 0
    assert set(r.causes) == set(BY_ID), "the default rubric must name every cause id"
    for cid in ("syntax-error", "definition-error", "missing-name", "missing-module"):
        assert r.points(r.causes[cid]) == r.max_score
    for bug in ("causal-mask-missing", "target-not-shifted", "missing-sqrt-dk", "softmax-wrong-dim"):
        for cheap in ("encoder-in-decode-loop", "no-warmup"):
            assert r.points(r.causes[bug]) > r.points(r.causes[cheap])
    assert r.causes["grader-fault"] == 0


def _result(verdict="problems", causes=(), failed_checks=(), error=None):
    return {"verdict": verdict, "diagnoses": [_diag(c) for c in causes], "error": error,
            "checks": [{"id": c, "status": "fail"} for c in failed_checks]}


def test_scores_from_a_custom_rubric_are_computed_and_clamped():
    r = rubric.parse('name = "lab 3"\nmax_score = 20\nerror_score = 2\ndefault_deduction = 1\n'
                     '[causes]\ncausal-mask-missing = 8\nno-warmup = 0.5\nsyntax-error = "all"\n'
                     '[checks]\noverfit = 3\n', "lab3.toml")
    assert r.name == "lab 3" and len(r.digest) == 64
    g = rubric.score(_result(causes=["causal-mask-missing", "no-warmup", "missing-residual"]), r)
    assert g["score"] == 20 - 8 - 0.5 - 1 and g["max_score"] == 20
    assert [(b["id"], b["points"]) for b in g["breakdown"]] == [
        ("causal-mask-missing", -8), ("no-warmup", -0.5), ("missing-residual", -1)]
    assert rubric.score(_result(causes=["syntax-error"]), r)["score"] == 0
    assert rubric.score(_result(causes=["causal-mask-missing"] * 2 + ["source-ignored"] * 30), r)["score"] == 11
    g = rubric.score(_result(causes=["causal-mask-missing", "no-warmup", "stale-mask"], failed_checks=["overfit"]), r)
    assert g["score"] == 20 - 8 - 0.5 - 1 - 3
    many = _result(causes=["causal-mask-missing", "causal-mask-inverted", "source-ignored"], failed_checks=["overfit"])
    assert rubric.score(many, rubric.parse("max_score = 10\ndefault_deduction = 6\n"))["score"] == 0   # clamped
    assert rubric.score(_result("clean"), r)["score"] == 20
    err = {"kind": "timeout", "reason": "did not finish within 60 s", "student_fault": True}
    assert rubric.score(_result("error", ["timeout"], error=err), r)["score"] == 2
    grader = {"kind": "grader-fault", "reason": "x", "student_fault": False}
    assert rubric.score(_result("error", error=grader), r)["score"] is None


@pytest.mark.parametrize("text, message", [
    ("max_score = 10\ncolour = 1\n", "unknown key 'colour'"),
    ("max_score = 10\n[causes]\ncausal-mask-mising = 3\n", "Did you mean: causal-mask-missing"),
    ("max_score = 10\n[checks]\noverfitt = 3\n", "unknown check id 'overfitt'"),
    ("max_score = 10\n[causes]\nno-warmup = -1\n", "must be >= 0"),
    ("max_score = 10\n[causes]\nno-warmup = 'lots'\n", "must be a number"),
    ("[causes]\nno-warmup = 1\n", "max_score is required"),
    ("max_score = 0\n", "max_score must be > 0"),
    ("max_score = 10\nerror_score = 11\n", "above max_score"),
    ("max_score = 10\ncauses = 3\n", "must be a table"),
    ("max_score = = 10\n", "not valid TOML"),
])
def test_invalid_rubrics_are_refused_with_a_clear_message(text, message):
    with pytest.raises(rubric.RubricError, match=message.replace("(", r"\(")):
        rubric.parse(text, "r.toml")


# --------------------------------------------------------------------------- input checks and discovery

def test_bad_input_exits_2_and_touches_nothing_of_the_students(tmp_path):
    src = make_class(tmp_path)
    before = sorted((p.relative_to(src), p.stat().st_mtime_ns) for p in src.rglob("*"))
    r = grade_cli(tmp_path / "missing", "--out", tmp_path / "o")
    assert r.exit_code == 2 and "no such folder" in r.output
    r = grade_cli(src, "--out", src / "grades")
    assert r.exit_code == 2 and "inside the submissions folder" in r.output
    r = grade_cli(src, "--out", src)
    assert r.exit_code == 2
    r = grade_cli(src, "--out", tmp_path)
    assert r.exit_code == 2 and "inside the output folder" in r.output
    r = grade_cli(src, "--out", tmp_path / "o", "--rubric", tmp_path / "nope.toml")
    assert r.exit_code == 2 and "cannot read the rubric" in r.output
    (tmp_path / "bad.toml").write_text("max_score = 10\n[causes]\nnot-a-cause = 1\n")
    r = grade_cli(src, "--out", tmp_path / "o", "--rubric", tmp_path / "bad.toml")
    assert r.exit_code == 2 and "unknown cause id 'not-a-cause'" in r.output
    (tmp_path / "afile").write_text("x")
    r = grade_cli(tmp_path / "afile", "--out", tmp_path / "o")
    assert r.exit_code == 2 and "not a folder" in r.output
    assert not (tmp_path / "o").exists() and not (src / "grades").exists()
    assert sorted((p.relative_to(src), p.stat().st_mtime_ns) for p in src.rglob("*")) == before


def test_discover_files_folders_and_ambiguous_entries(tmp_path):
    src = tmp_path / "s"
    for name in ("ann.py", "ben.ipynb", "dup.py", "dup.ipynb", "notes.txt", ".hidden.py"):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text("x")
    for folder, files in {"cat": ["src/model.py", ".ipynb_checkpoints/model-checkpoint.py", "data.csv"],
                          "dan": [], "eve": ["a.py", "b.ipynb"], "__pycache__": ["x.py"]}.items():
        (src / folder).mkdir()
        for f in files:
            (src / folder / f).parent.mkdir(parents=True, exist_ok=True)
            (src / folder / f).write_text("x")
    subs, ignored = discover(src)
    by = {s.student: s for s in subs}
    assert sorted(by) == ["ann", "ben", "cat", "dan", "dup.ipynb", "dup.py", "eve"]
    assert by["cat"].path == src / "cat" / "src" / "model.py" and by["cat"].problem is None
    assert "has no .py or .ipynb file" in by["dan"].problem
    assert "has 2 .py/.ipynb files" in by["eve"].problem and "a.py" in by["eve"].problem
    assert ignored == ["notes.txt"]


# --------------------------------------------------------------------------- the batch, with the fake checker

def test_grade_writes_every_output_and_scores_by_the_rubric(tmp_path, fake):
    src, out = make_class(tmp_path), tmp_path / "out"
    (src / "frank").mkdir()                                  # no file: an error row, not a crash
    s = run_fake(src, out)
    assert sorted(s.graded) == ["alice", "bob", "carol", "dave", "erin"] and s.problems == ["frank"]
    rows = {r["student"]: r for r in read_csv(out / "grades.csv", drop=())}
    assert list(rows) == ["alice", "bob", "carol", "dave", "erin", "frank"]
    assert rows["alice"] | {} == {"student": "alice", "score": "100", "max_score": "100", "verdict": "clean",
                                  "fault": "none", "integrity": "", "causes": "", "seconds": "1.5", "reason": ""}
    assert rows["bob"]["score"] == "65" and rows["bob"]["causes"] == "causal-mask-missing;no-warmup"
    assert rows["erin"]["score"] == "95"
    assert rows["dave"]["verdict"] == "error" and rows["dave"]["fault"] == "student" and rows["dave"]["score"] == "0"
    assert "did not finish" in rows["dave"]["reason"]
    assert rows["frank"]["verdict"] == "error" and "no .py or .ipynb" in rows["frank"]["reason"]
    for sid in rows:
        res = json.loads((out / "students" / sid / "result.json").read_text())
        assert res["grade"]["max_score"] == 100 and res["grading"]["student"] == sid
        assert_gradescope(json.loads((out / "students" / sid / "results.json").read_text()))
    bob = json.loads((out / "students" / "bob" / "result.json").read_text())
    assert bob["submission"] == "bob.py", "neither the temporary copy's path nor the instructor's may show"
    assert str(src) not in json.dumps({k: v for k, v in bob.items() if k != "grading"})   # grading: the instructor's
    assert str(src) not in (out / "students" / "bob" / "report.html").read_text()
    assert bob["grading"]["key"] == cache_key(bob["grading"]["sha256"], Options(quick=True))
    assert bob["grading"]["limits"]["threads"] == 1              # jobs > 1: one thread per check
    html = (out / "index.html").read_text()
    assert "causal-mask-missing" in html and 'href="students/bob/' in html and "<script>" in html
    summary = gradebook.cause_summary(gradebook.collect(out, [(k, None) for k in rows]))
    assert [(c["id"], c["count"]) for c in summary][:1] == [("causal-mask-missing", 2)]
    log = (out / "grading.log").read_text()
    assert log.count(" graded ") == 5 and "problem frank" in log
    # issue 27: the cards' counts are those of the sections, the fault column says what is true, one file mode,
    # no lock left behind
    all_rows = gradebook.collect(out, [(k, None) for k in rows])
    st = gradebook.stats(all_rows)
    stopped_in_section = sum(c["count"] for c in summary if not c["ran"])
    assert st["stopped"] == stopped_in_section == sum(1 for r in all_rows if gradebook.stopped_row(r)) >= 2
    assert st["verdicts"]["clean"] + st["with_problems"] + st["stopped"] == len(all_rows)
    assert f'<b class="v-error">{st["stopped"]}</b>could not be checked' in html
    assert "code stopped it" in html and ">none<" not in html
    assert {oct(p.stat().st_mode & 0o777) for p in [out / "grades.csv", out / "index.html",
                                                     *out.glob("students/*/*")]} == {"0o644"}
    assert not (out / ".grading.lock").exists()


def test_rerun_resumes_and_matches_an_uninterrupted_run(tmp_path, fake):
    src = make_class(tmp_path)
    run_fake(src, tmp_path / "whole")
    assert sorted(fake.calls) == ["alice", "bob", "carol", "dave", "erin"]

    out = tmp_path / "out"
    fake.calls.clear()
    fake.interrupt_for.add("carol")                          # Ctrl-C while carol is being checked
    with pytest.raises(KeyboardInterrupt):
        run_fake(src, out, jobs=1)
    done = {p.parent.name for p in (out / "students").glob("*/result.json")}
    assert done == {"alice", "bob"}, "results finished before the interruption are kept"
    pending = {r["student"]: r["verdict"] for r in read_csv(out / "grades.csv")}
    assert pending == {"alice": "clean", "bob": "problems", "carol": "pending", "dave": "pending", "erin": "pending"}

    fake.interrupt_for.clear()
    fake.calls.clear()
    mtimes = {s: (out / "students" / s / "result.json").stat().st_mtime_ns for s in done}
    s = run_fake(src, out)
    assert sorted(fake.calls) == ["carol", "dave", "erin"] and sorted(s.reused) == ["alice", "bob"]
    assert {s: (out / "students" / s / "result.json").stat().st_mtime_ns for s in done} == mtimes
    assert (out / "grades.csv").read_text() == (tmp_path / "whole" / "grades.csv").read_text()

    # a deleted result is regraded, and only it
    (out / "students" / "erin" / "result.json").unlink()
    fake.calls.clear()
    run_fake(src, out)
    assert fake.calls == ["erin"]
    assert (out / "grades.csv").read_text() == (tmp_path / "whole" / "grades.csv").read_text()

    # a changed file is regraded; --force regrades all
    (src / "alice.py").write_text("bug no-warmup")
    fake.calls.clear()
    run_fake(src, out)
    assert fake.calls == ["alice"]
    fake.calls.clear()
    run_fake(src, out, force=True)
    assert sorted(fake.calls) == ["alice", "bob", "carol", "dave", "erin"]
    # options that change results invalidate the cache
    fake.calls.clear()
    run_fake(src, out, seed=1)
    assert len(fake.calls) == 5


def test_a_new_rubric_rescores_without_regrading(tmp_path, fake):
    src, out = make_class(tmp_path), tmp_path / "out"
    run_fake(src, out)
    fake.calls.clear()
    (tmp_path / "r.toml").write_text("max_score = 10\n[causes]\ncausal-mask-missing = 4\nno-warmup = 1\n")
    r = grade_cli(src, "--out", out, "--quick", "--rubric", tmp_path / "r.toml", "--no-progress")
    assert r.exit_code == 0, r.output
    assert fake.calls == []                          # nothing was checked again (the CLI uses the real checker)
    scores = {row["student"]: row["score"] for row in read_csv(out / "grades.csv")}
    assert scores == {"alice": "10", "bob": "5", "carol": "6", "dave": "0", "erin": "10"}
    assert "rescored" in r.output
    gs = json.loads((out / "students" / "bob" / "results.json").read_text())
    assert gs["score"] == 5


def test_grader_faults_are_told_apart_and_retried(tmp_path, fake):
    src, out = make_class(tmp_path), tmp_path / "out"
    (src / "gina.py").write_text("graderfault")
    fake.raise_for.add("erin")                       # an exception in the grader while checking erin
    s = run_fake(src, out)
    assert sorted(s.grader_faults) == ["erin", "gina"]
    rows = {r["student"]: r for r in read_csv(out / "grades.csv")}
    assert rows["erin"]["fault"] == rows["gina"]["fault"] == "grader"
    assert rows["erin"]["score"] == "" and "simulated grader bug" in rows["erin"]["reason"]
    assert rows["dave"]["fault"] == "student" and rows["alice"]["fault"] == "none"
    assert "Traceback" in (out / "grading.log").read_text()
    assert_gradescope(json.loads((out / "students" / "erin" / "results.json").read_text()))
    fake.raise_for.clear()
    fake.calls.clear()
    s = run_fake(src, out)
    assert sorted(fake.calls) == ["erin", "gina"], "grader faults are not cached as done"
    assert {r["student"]: r["fault"] for r in read_csv(out / "grades.csv")}["erin"] == "none"


def test_fault_of():
    assert fault_of(_result("clean")) == "none"
    assert fault_of(_result(causes=["no-warmup"])) == "none"
    assert fault_of(_result(causes=["syntax-error"])) == "student"
    assert fault_of(_result("error", ["crashed"], error={"student_fault": True})) == "student"
    assert fault_of(_result("error", error={"student_fault": False})) == "grader"


def test_gradescope_results_for_every_kind_of_result():
    r = rubric.load()
    for res in (_result("clean"), _result(causes=["causal-mask-missing", "no-warmup"]),
                _result("error", ["timeout"], error={"kind": "timeout", "reason": "too slow", "student_fault": True}),
                _result("error", error={"kind": "grader-fault", "reason": "x", "student_fault": False})):
        res["checks"] = [{"id": "causal-leak", "status": "fail", "measured": 0.5,
                          "expected": "0", "detail": "d"}]
        out = gradescope_results(res, rubric.score(res, r), visibility="after_due_date", execution_time=12.4)
        assert_gradescope(out)
        assert out["visibility"] == "after_due_date" and out["execution_time"] == 12
    out = gradescope_results(_result(causes=["causal-mask-missing"]), rubric.score(
        _result(causes=["causal-mask-missing"]), r))
    assert out["score"] == 70 and out["tests"][0]["max_score"] == 30 and out["tests"][0]["status"] == "failed"


# --------------------------------------------------------------------------- real child processes


def _export_mutants(dest: Path, ids: list[str]) -> list[str]:
    """Exported mutants (anonymous files + manifest), as a course would get them; returns the files' stems."""
    exported = dest / "export"
    r = CliRunner().invoke(main, ["mutants", "export", str(exported)])
    assert r.exit_code == 0, r.output
    manifest = json.loads((exported / "manifest.json").read_text())   # {file: {id, cause, ...}}
    chosen = []
    for file, row in sorted(manifest.items()):
        if row["id"] in ids:
            shutil.copy(exported / file, dest / file)
            chosen.append((row["id"], Path(file).stem))
    assert len(chosen) == len(ids)
    return chosen


