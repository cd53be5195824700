"""What a user reads after `check`, end to end through the CLI (python -m harness, one process per check, as a user
runs it): the same text with the sandbox on and off, and never a Python None, a nan or a word cut in two
(tests/output_scan.py) in the terminal summary, the HTML report or the JSON.

The bug this guards: the sandbox's copy of the harness lacked the reference's measured brief training, so every
full `reversal` check run in the sandbox said "reference after the same training: None" (0.12 without it). The
parent now fills those numbers in; the sandbox carries only the data files the child reads (sandbox.CHILD_DATA).

A full check trains briefly (10-50 s on a shared 2-core machine): each check runs once, in a module-scoped
fixture, and several tests read it.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from compare_results import comparable
from output_scan import scan

from harness.isolation import sandbox

ROOT = Path(__file__).resolve().parents[2]
LESSON = ROOT / "submissions" / "reversal_lesson.py"
MUTANT_ID = "reversal-softmax-wrong-dim"      # a buggy file: diagnoses with evidence, a location, a fix


@dataclass
class Run:
    code: int
    terminal: str        # the summary (stdout); progress lines go to stderr
    html: str
    result: dict
    source: str


def check(tmp: Path, submission: Path, isolate: str, quick: bool) -> Run:
    name = f"{submission.stem}-{isolate}-{'quick' if quick else 'full'}"
    j, h = tmp / f"{name}.json", tmp / f"{name}.html"
    env = dict(os.environ, MTXDIAG_ISOLATE=isolate, MTXDIAG_DAEMON="0", NO_COLOR="1")
    env.pop("COLUMNS", None)
    args = [sys.executable, "-m", "harness", "check", str(submission), "--json", str(j), "--html", str(h)]
    r = subprocess.run(args + (["--quick"] if quick else []), cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode in (0, 1), f"check exited {r.returncode}:\n{r.stdout}\n{r.stderr[-3000:]}"
    return Run(r.returncode, r.stdout, h.read_text(encoding="utf-8"), json.loads(j.read_text()),
               submission.read_text(encoding="utf-8"))


def normalised(text: str, tmp: Path) -> str:
    """The summary less what differs between two runs of the same file: times and the run's own paths."""
    text = text.replace(str(tmp), "<tmp>")
    text = re.sub(r"\b\d+(\.\d+)?s\b", "<t>s", text)
    return re.sub(r"<tmp>/\S+-(bwrap|none)-(quick|full)\.", "<tmp>/<name>.", text)


def _untimed(v):
    """A result less the seconds its artifacts record (the brief training's own duration)."""
    if isinstance(v, dict):
        return {k: _untimed(x) for k, x in v.items() if k != "seconds"}
    return [_untimed(x) for x in v] if isinstance(v, list) else v


def _need_bwrap():
    if not sandbox.available():
        pytest.skip(f"bubblewrap is not usable here: {sandbox.unavailable_reason()}")


@pytest.fixture(scope="module")
def tmp() -> Path:
    with tempfile.TemporaryDirectory(prefix="mtxdiag-outputs-") as d:
        yield Path(d)


@pytest.fixture(scope="module")
def mutant(tmp) -> Path:
    out = tmp / "mutants"
    r = subprocess.run([sys.executable, "-m", "harness", "mutants", "export", str(out), "--assignment", "reversal"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    name = next(f for f, m in manifest.items() if m["id"] == MUTANT_ID)
    return out / name


@pytest.fixture(scope="module")
def lesson_full_sandboxed(tmp) -> Run:
    _need_bwrap()
    return check(tmp, LESSON, "bwrap", quick=False)


@pytest.fixture(scope="module")
def lesson_full_open(tmp) -> Run:
    return check(tmp, LESSON, "none", quick=False)


@pytest.fixture(scope="module")
def lesson_quick(tmp) -> Run:
    _need_bwrap()
    return check(tmp, LESSON, "bwrap", quick=True)


@pytest.fixture(scope="module")
def mutant_full(tmp, mutant) -> Run:
    _need_bwrap()
    return check(tmp, mutant, "bwrap", quick=False)


@pytest.fixture(scope="module")
def mutant_quick(tmp, mutant) -> Run:
    _need_bwrap()
    return check(tmp, mutant, "bwrap", quick=True)


def _reads_well(run: Run):
    problems = scan(terminal=run.terminal, html=run.html, result=run.result, sources=[run.source])
    assert not problems, "\n".join(problems[:40])


@pytest.mark.slow
def test_a_full_check_reads_the_same_with_the_sandbox_on_and_off(lesson_full_sandboxed, lesson_full_open, tmp):
    on, off = lesson_full_sandboxed, lesson_full_open
    assert normalised(on.terminal, tmp) == normalised(off.terminal, tmp)
    assert _untimed(comparable(on.result)) == _untimed(comparable(off.result))
    for run in (on, off):
        expected = {c["id"]: c["expected"] for c in run.result["checks"]}
        assert re.fullmatch(r"reference after the same training: 0\.\d+", expected["decode-accuracy"])
        assert re.fullmatch(r"anti-diagonal \(reference after the same training: 0\.\d+ of the mass\)",
                            expected["cross-attn-pattern"])
        assert "None" not in run.terminal


@pytest.mark.slow
def test_the_lessons_full_check_reads_well(lesson_full_sandboxed):
    _reads_well(lesson_full_sandboxed)


def test_the_lessons_quick_check_reads_well(lesson_quick):
    assert lesson_quick.result["quick"]
    _reads_well(lesson_quick)


@pytest.mark.slow
def test_a_mutants_full_check_reads_well(mutant_full):
    assert mutant_full.result["verdict"] == "problems" and mutant_full.code == 1
    _reads_well(mutant_full)


def test_a_mutants_quick_check_reads_well(mutant_quick):
    assert mutant_quick.result["verdict"] == "problems"
    _reads_well(mutant_quick)


def test_the_child_finds_lms_trained_checkpoint_in_the_sandbox(tmp):
    """lm's trained-checkpoint case reads reference_model/lm_tiny.json and .pt: both are in the snapshot."""
    _need_bwrap()
    code = ("import reference_model\nfrom harness.child.probes.lm.components import trained\n"
            "print(reference_model.__file__, trained() is not None)")
    work = tmp / "probe"
    work.mkdir()
    cmd = sandbox.command([sys.executable, "-c", code], work=work, isolate="bwrap")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": os.pathsep.join(sandbox.python_path("bwrap"))}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == [f"{sandbox.RUNTIME_MOUNT}/reference_model/__init__.py", "True"]
