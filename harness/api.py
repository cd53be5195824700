"""The library API that the CLI, the grader and the self-test all use: one submission in, one result out."""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import replace
from pathlib import Path

from .assignments import AUTO, folder_pack_of, for_folder
from .engine import build_result
from .protocol import CheckSpec, Limits
from .runner import run_spec


def check_file(path: str | os.PathLike, *, assignment: str = "auto", seed: int = 0, device: str = "cpu",
               quick: bool = False, limits: Limits | None = None, on_event=None, isolate: str = "auto",
               daemon: bool = False, say=None, acquire=None, early=None, support: str = "") -> dict:
    """Run every probe on one submission in a child process; return the validated result with diagnoses.

    `daemon`: in a fork of this user's check daemon's warm worker (daemon.py; CPU only); cold when none is
    running or it cannot be used (`say(text)` hears why, when that is unexpected). daemon.start() starts
    one; the CLI does so once its report is written. `acquire`, `early`: as runner.run_spec's (the daemon's own
    workers; a fork already started for this run). `support`: a folder of extra files copied beside the submission
    (gradescope build --files)."""
    spec = CheckSpec(str(Path(path)), assignment=assignment, seed=seed, device=device, quick=quick, isolate=isolate,
                     support=str(Path(support).resolve()) if support else "", limits=limits or Limits())
    return check_spec(spec, on_event=on_event, daemon=daemon, say=say, acquire=acquire, early=early)


def check_spec(spec: CheckSpec, *, on_event=None, daemon: bool = False, say=None, acquire=None, early=None) -> dict:
    """check_file for a request already typed (protocol.CheckSpec). A folder asked as `auto` that is a pack's
    assignment folder is checked as that pack's assignment (assignments.detect_folder)."""
    if spec.assignment == AUTO and Path(spec.path).is_dir() and folder_pack_of(for_folder(AUTO, spec.path)) is not None:
        spec = replace(spec, assignment=for_folder(AUTO, spec.path) or AUTO)
    outcome = None
    if daemon and spec.device == "cpu" and not spec.limits.warm:
        from .isolation import daemon as check_daemon
        outcome = check_daemon.check(spec, on_event=on_event, say=say)
    if outcome is None:
        outcome = run_spec(spec, on_event=on_event, acquire=acquire, early=early)
    elif early is not None:
        early.cancel()
    return build_result(outcome, spec.shown(), spec.assignment, quick=spec.quick)


def exit_code(result: dict) -> int:
    return 0 if result["verdict"] == "clean" else 1


def write_json_atomic(obj, path: str | os.PathLike) -> None:
    """Write, then rename: a reader never sees half a file, a crash never destroys the old one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=2, sort_keys=False)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)          # mkstemp makes 0600: every output file gets the reports' mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
