"""Run the repairs of one checked submission through the normal check path (api.check_file).

Each candidate is written into a fresh private folder under the submission's own name and checked like any
submission: the same sandbox, limits and seed, in a fork of the check daemon's warm worker when the check
used the daemon, else of a warm worker of this process (warm.py): no candidate pays a new interpreter.
"""
from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

from . import early
from ..api import check_file
from ..checks import DECLARED
from ..protocol import CheckSpec
from ..runner import Limits
from . import edit, verify


class Cancelled(Exception):
    """Whoever asked for the repairs is gone (the check daemon's client ended): no further re-check starts."""


def repair_check(result: dict, path, *, seed: int = 0, limits: Limits | None = None, daemon: bool = False,
                 say=None, max_diagnoses: int = verify.MAX_DIAGNOSES, acquire=None, cancelled=None) -> dict | None:
    """Add `repair` to the result's diagnoses (in place); the run's timing, or None when nothing applies (a
    notebook, a repository, a file that did not load). `acquire`: how a re-check gets its warm worker (the
    check daemon's, when the daemon makes the repairs: daemon_server.py). `cancelled()` true: raise Cancelled
    before the next re-check (the one running ends first: its worker may be another check's right after)."""
    path = Path(path)
    coverage = result.pop("coverage", None)     # the check's record of which functions each probe ran
    if not path.is_file() or path.suffix != ".py" or not result.get("checks") or not result.get("diagnoses"):
        return None
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    lim = limits or Limits()
    slowdown = result.get("timings", {}).get("slowdown")            # the machine as the check measured it
    slowdown = float(slowdown) if isinstance(slowdown, (int, float)) and 1.0 <= slowdown <= 100 else 0.0
    costs = _costs(result.get("timings", {}))     # the re-checks share their probes longest first by these
    daemon = daemon and _daemon_up()      # else warm workers of this process: no candidate runs cold
    base = replace(lim, warm=lim.warm or not daemon, coverage=False, slowdown=slowdown, costs=costs)
    assignment = result.get("assignment") or "auto"
    with tempfile.TemporaryDirectory(prefix="mtxdiag-repair-") as tmp:
        copy = Path(tmp) / path.name
        # the first re-check's fork starts up while its candidate is made (early.py); later ones start as usual
        first = [early.launch(CheckSpec(str(copy), assignment=assignment, seed=seed, quick=True, limits=base),
                              acquire) if base.warm and max_diagnoses > 0 and verify.will_try(result) else None]

        def recheck(code: str, only: str, extra: str, gate: str = "") -> dict:
            if cancelled is not None and cancelled():
                raise Cancelled()
            copy.write_text(code, encoding="utf-8")
            run_lim = replace(base, only_probes=only, extra_probes=extra, gate=gate)
            ready, first[0] = first[0], None
            r = check_file(copy, assignment=assignment, seed=seed, quick=True, limits=run_lim,
                           daemon=daemon and not run_lim.warm, say=say, acquire=acquire, early=ready)
            out = {}
            for c in r.get("checks", []):
                out.setdefault(c["id"], c)
            return out
        try:
            stats = verify.repair(result, source, path.name, recheck, max_diagnoses, coverage)
        finally:
            if first[0] is not None:        # no candidate was re-checked (or the repairs stopped): give it up
                first[0].cancel()
    result.setdefault("timings", {})["repair_s"] = stats["repair_s"]
    return stats


def prepare(path) -> None:
    """Parse the file now (edit.py caches the parse by its text), e.g. in a thread while its check runs."""
    path = Path(path)
    if path.is_file() and path.suffix == ".py":      # what repair_check reads and parses
        edit.warm(path.read_text(encoding="utf-8"))


def _costs(timings: dict) -> str:
    """The checked run's seconds per probe, as Limits.costs carries them (probe:seconds,...)."""
    return ",".join(f"{k}:{v:.3f}" for k, v in timings.items() if k in DECLARED and isinstance(v, (int, float))
                    and not isinstance(v, bool) and v >= 0)


def _daemon_up() -> bool:
    """This harness's check daemon is running (a check through it would not fall back to a cold run)."""
    try:
        from ..isolation import daemon as check_daemon
        return any(d.get("key") == check_daemon.key() for d in check_daemon.ask("status"))
    except Exception:      # noqa: BLE001 - unknown: use this process's warm workers
        return False


def patched_text(source: str, repair: dict) -> str | None:
    """The file with a verified repair applied again (the edits are deterministic): for `check --fix`. The
    same edit is found by its diff, else (the text already carries another repair) by its label."""
    if not repair or not repair.get("verified"):
        return None
    body = [ln for ln in (repair.get("diff") or "").splitlines() if not ln.startswith(("---", "+++"))]
    found = [c for c in edit.candidates(source, repair["line"], (repair["kind"],)) if c.label == repair["label"]]
    for c in found:
        if [ln for ln in verify.diff(source, c.code, "x").splitlines() if not ln.startswith(("---", "+++"))] == body:
            return c.code
    return found[0].code if len(found) == 1 else None


def fixed_path(path) -> Path:
    """Where --fix writes: beside the file, never over it (model.py -> model.fixed.py, then .fixed2 ...)."""
    path = Path(path)
    for n in range(1, 100):
        p = path.with_name(f"{path.stem}.fixed{'' if n == 1 else n}{path.suffix}")
        if not p.exists():
            return p
    raise FileExistsError(f"too many fixed copies of {path} already")
