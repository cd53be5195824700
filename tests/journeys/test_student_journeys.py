"""A student's journeys, typed as a student types them, from the installed wheel (see conftest.py)."""
from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

from journey import copy_example, mutant_file, assert_readable, assert_report_readable


def _sources(path):
    """The student's own text (words it spells are theirs, not a cut of the harness's)."""
    files = [path] if path.is_file() else sorted(path.rglob("*.py"))
    return tuple(f.read_text(encoding="utf-8", errors="replace") for f in files)


def _check(user, desk, target, *flags):
    r = user.run("check", target, *flags, cwd=desk)
    name = target.rstrip("/").split("/")[-1].rsplit(".", 1)[0]
    data = json.loads((desk / "reports" / f"{name}.json").read_text())
    src = _sources(desk / target)
    assert_readable(r.stdout, f"check {target} {flags}: terminal", src)
    assert_report_readable(desk / "reports" / f"{name}.json", desk / "reports" / f"{name}.html", src)
    return r, data


@pytest.mark.parametrize("flags", [(), ("--quick",)], ids=["full", "quick"])
def test_a_students_correct_file_checks_clean(user, desk, flags):
    copy_example("reversal_lesson.py", desk / "mymodel.py")
    r, data = _check(user, desk, "mymodel.py", *flags)
    assert r.returncode == 0 and data["verdict"] == "clean", (r.stdout[-3000:], r.stderr[-3000:])
    assert "CLEAN" in r.stdout and "mymodel.py" in r.stdout
    if not flags:     # the full check trains: its summary compares with the reference's own training
        assert data["reference"], "a full reversal check carries the reference's measured training"


def test_a_students_notebook_checks_clean(user, desk):
    copy_example("reversal_lesson.ipynb", desk / "lesson.ipynb")
    r, data = _check(user, desk, "lesson.ipynb", "--quick")
    assert r.returncode == 0 and data["verdict"] == "clean", r.stdout[-3000:]


def test_a_block_file_checks_clean(user, desk):
    copy_example("block_lesson.py", desk / "block.py")
    r, data = _check(user, desk, "block.py")
    assert r.returncode == 0 and data["verdict"] == "clean", r.stdout[-3000:]
    assert data["assignment"] == "block"


@pytest.mark.parametrize("flags", [(), ("--quick",)], ids=["full", "quick"])
def test_a_cs336_repository_checks_clean(user, desk, flags):
    copy_example("lm_example", desk / "assignment1-basics")
    r, data = _check(user, desk, "assignment1-basics", *flags)
    assert r.returncode == 0 and data["verdict"] == "clean", r.stdout[-3000:]
    assert data["assignment"] == "lm"
    if not flags:      # the brief training ran: a full lm check never passes with it skipped
        training = [c for c in data["checks"] if c["id"] == "lm-training"]
        assert training and training[0]["status"] == "pass", training


PLANTED = {"missing-sqrt-dk": "reversal-missing-sqrt-dk", "causal-mask-inverted": "reversal-causal-mask-inverted",
           "target-not-shifted": "reversal-target-not-shifted"}


@pytest.fixture(scope="module")
def mutant_files(user, tmp_path_factory):
    out = tmp_path_factory.mktemp("mutants")
    r = user.run("mutants", "export", out / "m", "--assignment", "reversal", cwd=out)
    assert r.returncode == 0, r.stderr
    return out / "m"


@pytest.mark.slow
@pytest.mark.parametrize("flags", [(), ("--quick",)], ids=["full", "quick"])
@pytest.mark.parametrize("cause", sorted(PLANTED))
def test_fix_writes_a_file_that_checks_clean(user, desk, mutant_files, cause, flags):
    src = mutant_file(mutant_files, PLANTED[cause])
    (desk / "model.py").write_text(src.read_text())
    r = user.run("check", "model.py", "--fix", *flags, cwd=desk)
    assert r.returncode == 1, r.stdout[-3000:]
    assert_readable(r.stdout, f"check --fix {cause} {flags}", (src.read_text(),))
    assert cause in r.stdout and "repair verified" in r.stdout, r.stdout[-4000:]
    fixed = desk / "model.fixed.py"
    assert fixed.is_file(), r.stdout[-3000:]
    assert (desk / "model.py").read_text() == src.read_text(), "--fix never changes the student's file"
    again = user.run("check", "model.fixed.py", *flags, cwd=desk)
    assert again.returncode == 0 and "CLEAN" in again.stdout, again.stdout[-3000:]


class _Lines:
    """A process's output read line by line on a thread of its own, so that waiting for a line has a limit."""

    def __init__(self, proc):
        self.seen, self._lock = "", threading.Lock()
        threading.Thread(target=self._pump, args=(proc.stdout,), daemon=True).start()

    def _pump(self, stream):
        for line in stream:
            with self._lock:
                self.seen += line

    def until(self, needle: str, limit_s: float, after: int = 0) -> str:
        end = time.monotonic() + limit_s
        while time.monotonic() < end:
            with self._lock:
                if needle in self.seen[after:]:
                    return self.seen[after:]
            time.sleep(0.2)
        raise AssertionError(f"{needle!r} not seen in {limit_s} s: {self.seen[after:][-3000:]}")


def test_watch_checks_again_on_save(user, desk, mutant_files):
    lesson = copy_example("reversal_lesson.py", desk / "mymodel.py").read_text()
    proc = user.popen("watch", "mymodel.py", "--interval", "0.3", cwd=desk)
    try:
        out = _Lines(proc)
        first = out.until("CLEAN", 300)
        src = mutant_file(mutant_files, PLANTED["missing-sqrt-dk"])
        (desk / "mymodel.py").write_text(src.read_text())
        second = out.until("missing-sqrt-dk", 300, after=len(first))
        assert_readable(first + second, "watch", (lesson, src.read_text()))
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except Exception:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    assert proc.returncode == 1, "watch exits with the last check's status (problems: 1)"


def test_a_repository_whose_model_takes_positions_trains_briefly(user, tmp_path):
    """A blocker seen on real CS336 repositories: an adapter that calls the model with arguments of its own
    (here token_positions=) had its brief training skipped while the summary said CLEAN."""
    from test_lm_model_call import positions_repo
    path = positions_repo(tmp_path)
    r, data = _check(user, tmp_path, path.name)
    training = {c["id"]: c for c in data["checks"]}["lm-training"]
    assert training["status"] == "pass", training
    assert r.returncode == 0 and data["verdict"] == "clean", r.stdout[-3000:]
