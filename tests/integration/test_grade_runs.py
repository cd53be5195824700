"""Grading with real checks, Dask clusters and the Gradescope entry point (child processes); grading's rules, rubric and writers in-process: tests/unit/test_grade.py."""
from __future__ import annotations

import json
import shutil
import time
import pytest
from click.testing import CliRunner
import mutants
from harness.cli.main import main
from harness.grading.grade import Options

from test_grade import EXITS, HANGS, MEMORY_HOG, NOTEBOOK, REFERENCE, ROOT, SYNTAX_ERROR, _export_mutants, assert_gradescope, fake, fake_check, grade_cli, make_class, read_csv, run_fake  # noqa: F401, F811 (fixtures, helpers)


def test_dask_local_cluster_with_the_fake_checker(tmp_path, fake):
    distributed = pytest.importorskip("dask.distributed")
    src, out = make_class(tmp_path), tmp_path / "out"
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=":0") as cluster:
        s = run_fake(src, out, scheduler=cluster.scheduler_address)
    assert sorted(s.graded) == ["alice", "bob", "carol", "dave", "erin"]
    run_fake(src, tmp_path / "local")
    assert (out / "grades.csv").read_text() == (tmp_path / "local" / "grades.csv").read_text()


def test_a_report_rendered_on_the_worker_is_the_one_the_grading_process_renders(tmp_path, fake):
    """Dask jobs render the report where the check ran; it must be the same page, naming the student's file."""
    from harness.grading.results import _job, grade_one
    from harness.report import html as html_report
    src = tmp_path / "class & co"
    src.mkdir()
    sub = src / "zoe.py"
    sub.write_text("forbidden os.system\nline two\nline three <b>\n")
    from harness.grading.discovery import Submission
    job = dict(_job(Submission("zoe", sub, data=sub.read_bytes()), Options(quick=True)), render=True)

    def located(path, **kw):         # the fake's diagnosis, at line 3 of the file checked
        r = fake_check(path, **kw)
        r["diagnoses"][0]["location"] = {"file": str(path), "line": 3}
        return r
    out = grade_one(job, located)
    here = html_report.render(out["result"], source_path=sub)
    assert out["report_html"] == here
    assert "line three &lt;b&gt;" in here and "zoe.py" in here      # the excerpt and the student's own path
    assert "class &amp; co" not in here and str(src) not in here    # never the instructor's folder
    plain = grade_one(dict(job, render=False), located)
    assert "report_html" not in plain


def test_failing_submissions_get_error_rows_and_the_batch_goes_on(tmp_path):
    """Real checks (--quick) of submissions that fail at definition time; the hanging one cannot stretch the run."""
    src = tmp_path / "subs"
    src.mkdir()
    for name, text in {"syntax": SYNTAX_ERROR, "hangs": HANGS, "hog": MEMORY_HOG, "exits": EXITS}.items():
        (src / f"{name}.py").write_text(text)
    (src / "nofile").mkdir()
    (src / "twofiles").mkdir()
    (src / "twofiles" / "a.py").write_text(SYNTAX_ERROR)
    (src / "twofiles" / "b.py").write_text(SYNTAX_ERROR)
    out = tmp_path / "out"
    t0 = time.monotonic()
    r = grade_cli(src, "--out", out, "--jobs", 2, "--quick", "--timeout", 20, "--memory", 4096)
    wall = time.monotonic() - t0
    assert r.exit_code == 0, r.output
    assert wall < 150, wall                          # three ~5 s checks beside one that is stopped at 20 s
    rows = {row["student"]: row for row in read_csv(out / "grades.csv")}
    assert set(rows) == {"syntax", "hangs", "hog", "exits", "nofile", "twofiles"}
    assert rows["syntax"]["verdict"] == "problems" and rows["syntax"]["causes"] == "syntax-error"
    assert rows["hangs"]["verdict"] == "error" and rows["hangs"]["causes"] == "timeout"
    assert "did not finish within 20 s" in rows["hangs"]["reason"]
    assert rows["hog"]["verdict"] in ("problems", "error") and "memory" in (rows["hog"]["reason"] + rows["hog"]["causes"]).lower()
    assert rows["exits"]["verdict"] == "error" and "status 3" in rows["exits"]["reason"]
    assert "exactly one" in rows["twofiles"]["reason"] and "no .py" in rows["nofile"]["reason"]
    for row in rows.values():
        assert row["score"] == "0" and row["fault"] == "student"
        assert_gradescope(json.loads((out / "students" / row["student"] / "results.json").read_text()))
    assert "ETA" in r.stderr and "[6/6, ETA" in r.stderr   # the last submission done (grade_progress)
    # a rerun checks nothing again
    r = grade_cli(src, "--out", out, "--jobs", 2, "--quick", "--timeout", 20, "--memory", 4096)
    assert "0 graded, 4 reused" in r.output


def test_gradescope_entry_point(tmp_path):
    sub, res = tmp_path / "submission", tmp_path / "results" / "results.json"
    sub.mkdir()
    runner = CliRunner()
    r = runner.invoke(main, ["gradescope", "--submission-dir", str(sub), "--results", str(res), "--quick"])
    assert r.exit_code == 0, r.output
    d = json.loads(res.read_text())
    assert_gradescope(d)
    assert d["score"] == 0 and "no .py or .ipynb" in d["output"]
    (sub / "deep").mkdir()
    (sub / "deep" / "model.py").write_text(SYNTAX_ERROR)
    r = runner.invoke(main, ["gradescope", "--submission-dir", str(sub), "--results", str(res), "--quick",
                             "--visibility", "after_published"])
    assert r.exit_code == 0, r.output
    d = json.loads(res.read_text())
    assert_gradescope(d)
    assert d["score"] == 0 and d["visibility"] == "after_published" and d["stdout_visibility"] == "hidden"
    assert d["tests"][0]["name"].endswith("[syntax-error]") and "line 2" in d["tests"][0]["output"]
    r = runner.invoke(main, ["gradescope", "--submission-dir", str(tmp_path / "none"), "--results", str(res)])
    assert r.exit_code == 2 and "does not exist" in r.output


@pytest.mark.slow
def test_grade_a_mixed_class(tmp_path):
    """The issue's scenario: reference, exported mutants, a notebook and four broken files, --jobs 2."""
    src = tmp_path / "subs"
    src.mkdir()
    shutil.copy(REFERENCE, src / "reference.py")
    shutil.copy(NOTEBOOK, src / "notebook.ipynb")
    muts = _export_mutants(src, ["reversal-causal-mask-missing", "reversal-target-not-shifted",
                                 "reversal-encoder-in-decode-loop"])
    shutil.rmtree(src / "export")
    for name, text in {"syntax": SYNTAX_ERROR, "hangs": HANGS, "hog": MEMORY_HOG, "exits": EXITS}.items():
        (src / f"{name}.py").write_text(text)
    out = tmp_path / "out"
    t0 = time.monotonic()
    r = grade_cli(src, "--out", out, "--jobs", 2, "--quick", "--timeout", 60, "--memory", 4096)
    wall = time.monotonic() - t0
    assert r.exit_code == 0, r.output
    assert wall < 400, wall                          # 9 quick checks on 2 workers; the hang costs 60 s, once
    rows = {row["student"]: row for row in read_csv(out / "grades.csv")}
    assert len(rows) == 9
    assert rows["reference"]["verdict"] == "clean" and rows["reference"]["score"] == "100"
    assert rows["notebook"]["verdict"] == "clean"
    for mutant_id, stem in muts:
        cause = mutants.get(mutant_id).cause
        assert rows[stem]["verdict"] == "problems" and cause in rows[stem]["causes"].split(";"), rows[stem]
        assert 0 < float(rows[stem]["score"]) < 100 and rows[stem]["fault"] == "none"
    assert float(rows[dict(muts)["reversal-causal-mask-missing"]]["score"]) < \
        float(rows[dict(muts)["reversal-encoder-in-decode-loop"]]["score"])
    # a class body that never ends is stopped by the load limit (30 s), before the check's own 60 s
    assert rows["hangs"]["causes"] == "timeout" and rows["hangs"]["score"] == "0"
    assert rows["exits"]["verdict"] == "error" and rows["syntax"]["causes"] == "syntax-error"
    assert rows["hog"]["verdict"] in ("problems", "error") and rows["hog"]["score"] == "0"
    for sid in rows:
        assert_gradescope(json.loads((out / "students" / sid / "results.json").read_text()))
    whole = (out / "grades.csv").read_text()

    # resume: delete one result; only it is checked again and the gradebook is the same
    (out / "students" / "reference" / "result.json").unlink()
    r = grade_cli(src, "--out", out, "--jobs", 2, "--quick", "--timeout", 60, "--memory", 4096)
    assert "1 graded, 8 reused" in r.output, r.output
    (tmp_path / "whole.csv").write_text(whole)
    assert read_csv(out / "grades.csv") == read_csv(tmp_path / "whole.csv")


@pytest.mark.slow
def test_dask_local_cluster_runs_real_checks(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    src = tmp_path / "subs"
    src.mkdir()
    (src / "syntax.py").write_text(SYNTAX_ERROR)
    (src / "exits.py").write_text(EXITS)
    (src / "hangs.py").write_text(HANGS)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True,
                                  dashboard_address=":0") as cluster:
        r = grade_cli(src, "--out", tmp_path / "out", "--quick", "--timeout", 30, "--memory", 4096,
                      "--scheduler", cluster.scheduler_address, "--no-progress")
    assert r.exit_code == 0, r.output
    rows = {row["student"]: row for row in read_csv(tmp_path / "out" / "grades.csv")}
    assert rows["syntax"]["causes"] == "syntax-error" and rows["exits"]["verdict"] == "error"
    assert rows["hangs"]["causes"] == "timeout"
    res = json.loads((tmp_path / "out" / "students" / "syntax" / "result.json").read_text())
    assert res["submission"] == "syntax.py"


def test_ctrl_c_stops_the_running_checks_and_keeps_the_gradebook(tmp_path):
    """SIGINT to `mtxdiag grade` while two hanging checks run: it exits at once (not after --timeout), kills
    their processes, and leaves a gradebook with the unfinished students 'pending'."""
    import signal
    import subprocess
    import sys
    src, out = tmp_path / "subs", tmp_path / "out"
    src.mkdir()
    for name in ("hang_a", "hang_b", "later"):
        (src / f"{name}.py").write_text(HANGS)
    cmd = [sys.executable, "-c", "from harness.cli.main import main; main()", "grade", str(src), "--out", str(out),
           "--jobs", "2", "--quick", "--timeout", "300", "--no-progress"]
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        kids: list[str] = []
        deadline = time.monotonic() + 60
        while len(kids) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
            kids = subprocess.run(["ps", "-o", "pid=", "--ppid", str(p.pid)], capture_output=True,
                                  text=True).stdout.split()
        assert len(kids) == 2, "the two checks did not start"
        time.sleep(1)
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130 and time.monotonic() - t0 < 30, err
    assert "interrupted" in err
    time.sleep(0.5)
    assert all(subprocess.run(["ps", "-p", k], capture_output=True).returncode != 0 for k in kids)
    rows = {r["student"]: r["verdict"] for r in read_csv(out / "grades.csv")}
    assert rows == {"hang_a": "pending", "hang_b": "pending", "later": "pending"}
    assert "run interrupted" in (out / "grading.log").read_text()
