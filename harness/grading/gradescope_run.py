"""`mtxdiag gradescope run ZIP SUBMISSION`: an autograder zip run as Gradescope runs it, on this machine, no root.

A stand-in of the container's /autograder is made under a temporary folder (or --keep DIR, left for reading):
source/ (the zip, unpacked), submission/ (the student's file, or a folder's contents), results/. As on
Gradescope, setup.sh runs from source/, then run_autograder (copied to the root) from the root, its output
captured in results/stdout; results.json is then checked against Gradescope's format (gradescope_schema.py).
The scripts take the stand-in's paths from AUTOGRADER_ROOT and MTXDIAG_VENV (gradescope_build.py), so the zip
is the one uploaded, unchanged.

Setup, by default: setup.sh with MTXDIAG_SETUP_LOCAL=1 makes a fresh venv under the root with
--system-site-packages from this interpreter (torch and the allowed packages are found, not downloaded; no
apt-get) and pip-installs the zip's mtxdiag/ into it: what the zip installs is what grades. --no-setup skips
setup.sh: run_autograder runs this interpreter (`python -m harness`) with the zip's mtxdiag/ first on
PYTHONPATH, the zip's code on this environment's packages (seconds instead of a pip install).
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from . import gradescope_schema

SETUP_LIMIT_S = 900.0
RUN_LIMIT_S = 1200.0
# what the stand-in sets; a value of the caller's environment would point the scripts elsewhere
_OURS = ("AUTOGRADER_ROOT", "MTXDIAG_VENV", "MTXDIAG_CMD", "MTXDIAG_PYTHON", "MTXDIAG_SETUP_LOCAL", "PYTHONPATH",
         "PYTHONHOME", "VIRTUAL_ENV")


class RunError(ValueError):
    """The zip or the submission cannot be used; the message says why."""


@dataclass
class LocalRun:
    root: Path
    kept: bool
    setup: str                        # "skipped", "done", "failed", "timed out"
    setup_s: float = 0.0
    rc: int | None = None             # run_autograder's exit status; None: not run or timed out
    run_s: float = 0.0
    results: dict | None = None
    problems: list[str] = field(default_factory=list)     # schema violations, or why there is no results.json
    stdout_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.results is not None and not self.problems


def _extract(zip_path: Path, dest: Path) -> None:
    """The zip unpacked into dest: no name may leave it; executable bits kept (zipfile.extractall drops them)."""
    try:
        z = zipfile.ZipFile(zip_path)
    except (OSError, zipfile.BadZipFile) as e:
        raise RunError(f"{zip_path} is not a readable zip: {e}") from None
    with z:
        names = z.namelist()
        if not {"setup.sh", "run_autograder"} <= set(names):
            raise RunError(f"{zip_path} has no setup.sh and run_autograder at its root: not an autograder zip "
                           "(`mtxdiag gradescope build` writes one)")
        for info in z.infolist():
            parts = PurePosixPath(info.filename).parts
            if info.filename.startswith("/") or ".." in parts or "\\" in info.filename:
                raise RunError(f"{zip_path}: the entry {info.filename!r} would land outside the folder")
            target = dest.joinpath(*parts) if parts else dest
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)
            mode = (info.external_attr >> 16) & 0o777
            os.chmod(target, (mode or 0o644) | stat.S_IRUSR | stat.S_IWUSR)


def stage(zip_path: Path, submission: Path, root: Path) -> None:
    """root/{source,submission,results} and root/run_autograder, as Gradescope lays them out."""
    _extract(zip_path, root / "source")
    sub = root / "submission"
    if submission.is_dir():
        shutil.copytree(submission, sub, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        sub.mkdir()
        shutil.copy2(submission, sub / submission.name)
    (root / "results").mkdir()
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    os.chmod(root / "run_autograder", 0o755)


def _env(root: Path, with_setup: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _OURS}
    env["AUTOGRADER_ROOT"] = str(root)
    if with_setup:
        env.update(MTXDIAG_VENV=str(root / "venv"), MTXDIAG_PYTHON=sys.executable, MTXDIAG_SETUP_LOCAL="1")
    else:
        env.update(MTXDIAG_CMD=f"{sys.executable} -m harness", PYTHONPATH=str(root / "source" / "mtxdiag"))
    return env


def _bash(script: Path, cwd: Path, env: dict, log: Path, limit: float) -> tuple[int | None, float]:
    """bash SCRIPT with its stdout and stderr in log; (exit status or None on timeout, seconds)."""
    t0 = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(["bash", str(script)], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc: int | None = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)            # the script's whole session (the grader and its children)
            proc.wait()
            rc = None
    return rc, time.monotonic() - t0


def _tail(path: Path, n: int = 3000) -> str:
    try:
        return path.read_bytes()[-n:].decode("utf-8", "replace")
    except OSError:
        return ""


def _root(keep: Path | None) -> Path:
    if keep is None:
        return Path(tempfile.mkdtemp(prefix="mtxdiag-gradescope-"))
    if keep.exists() and (not keep.is_dir() or any(keep.iterdir())):
        raise RunError(f"--keep {keep} exists and is not an empty folder; nothing was written there")
    keep.mkdir(parents=True, exist_ok=True)
    return keep.resolve()


def local_run(zip_path: Path, submission: Path, *, keep: Path | None = None, setup: bool = True,
              setup_limit: float = SETUP_LIMIT_S, run_limit: float = RUN_LIMIT_S) -> LocalRun:
    """Stage, set up, run, check. RunError for a zip or submission that cannot be used."""
    zip_path, submission = Path(zip_path), Path(submission)
    if not zip_path.is_file():
        raise RunError(f"no zip at {zip_path}")
    if not submission.exists():
        raise RunError(f"no submission at {submission} (a file, or a folder of what the student uploads)")
    if not setup and any(c.isspace() for c in sys.executable):
        raise RunError(f"--no-setup runs {sys.executable}, whose path has a space run_autograder would split; "
                       "run with setup")
    root = _root(Path(keep) if keep is not None else None)
    run = LocalRun(root=root, kept=keep is not None, setup="skipped" if not setup else "")
    try:
        stage(zip_path, submission, root)
        env = _env(root, setup)
        if setup:
            rc, run.setup_s = _bash(root / "source" / "setup.sh", root / "source", env, root / "setup.log",
                                    setup_limit)
            run.setup = "done" if rc == 0 else "timed out" if rc is None else "failed"
            if rc != 0:
                run.problems.append(f"setup.sh {run.setup}" + (f" (exit {rc})" if rc is not None else "") +
                                    "; run_autograder was not run")
                run.stdout_tail = _tail(root / "setup.log")
                return run
        run.rc, run.run_s = _bash(root / "run_autograder", root, env, root / "results" / "stdout", run_limit)
        run.stdout_tail = _tail(root / "results" / "stdout")
        _read_results(run)
        return run
    finally:
        if not run.kept:
            shutil.rmtree(root, ignore_errors=True)


def _read_results(run: LocalRun) -> None:
    path = run.root / "results" / "results.json"
    ended = "timed out" if run.rc is None else f"exit {run.rc}"
    if not path.is_file():
        run.problems.append(f"run_autograder ({ended}) wrote no results/results.json")
        return
    text = path.read_bytes()
    run.problems.extend(gradescope_schema.violations(text))
    try:
        data = json.loads(text)
    except ValueError:
        return
    if isinstance(data, dict):
        run.results = data


def summary(run: LocalRun, submission: str) -> str:
    """A few lines for the terminal; what came from the submission passes through report.sanitize.clean."""
    from ..report.sanitize import clean, clean_block
    lines = [f"mtxdiag gradescope run: {clean(submission)}"]
    if run.setup == "skipped":
        lines.append("  setup: skipped (--no-setup: this interpreter, the zip's mtxdiag/ on PYTHONPATH)")
    else:
        lines.append(f"  setup: {run.setup} in {run.setup_s:.1f} s (a venv with this interpreter's packages)")
    if run.setup in ("skipped", "done"):
        ended = "timed out" if run.rc is None else f"exit {run.rc}"
        lines.append(f"  run_autograder: {ended} in {run.run_s:.1f} s")
    res = run.results
    if res is not None:
        raw = res.get("tests")
        tests: list = raw if isinstance(raw, list) else []
        status = [t.get("status") for t in tests if isinstance(t, dict)]
        passed, failed = status.count("passed"), status.count("failed")
        top = gradescope_schema.max_score(res)
        score = res.get("score")
        shown = f"{score:g}" if isinstance(score, (int, float)) and not isinstance(score, bool) else repr(score)
        lines.append(f"  score: {shown}" + (f" / {top:g}" if top is not None else "") +
                     f"   tests: {len(tests)} ({passed} passed, {failed} failed)")
        first = str(res.get("output", "")).strip().splitlines()[:3]
        lines += [f"  output: {clean(line)[:160]}" for line in first]
    if run.problems:
        lines.append(f"  results.json: {len(run.problems)} problem(s)")
        lines += [f"    - {clean(p)[:300]}" for p in run.problems[:20]]
        if run.stdout_tail:
            lines.append("  last output of the script:")
            lines += ["    " + line for line in clean_block(run.stdout_tail).splitlines()[-15:]]
    else:
        lines.append("  results.json: valid (Gradescope's format)")
    lines.append(f"  kept: {run.root}" if run.kept else "  (the stand-in was removed; --keep DIR keeps it)")
    return "\n".join(lines)
