"""Where `mtxdiag check FILE --quick` spends its time, phase by phase (issue 14).

    python bench/profile_check.py [--repeat 5] [--full] [--baseline TREE] [FILE_OR_REPO ...]

Each run is a fresh interpreter doing what `python -m harness check FILE --quick` does, with a clock between
the steps: interpreter start, the parent's imports (harness.cli.main and what it pulls in), the child (sandbox
spawn + Python start, torch import, calibration, probe imports; then load and each probe, from the child's
JSON `timings`), the rules (engine.build_result), JSON writing, HTML rendering (import and write) and the
terminal summary. `e2e` is the wall clock from spawning the interpreter to its exit. As the CLI does, the
run uses two cores when the machine has them (the training probes in a second process: child_side.py) and
warms the HTML report up in a thread while the child runs (`html_warm_wait_s`: what was left to wait for).

Without files: the lesson's code (submissions/reversal_lesson.py) and the reference exported as an `lm`
repository. With --baseline TREE (another checkout, e.g. `git worktree add` or `git archive | tar -x` of the
commit to compare with) every run alternates the two trees, so both see the same machine load; medians over
--repeat runs. The diagnoses (id, confidence, line) of every run are compared too: a speed-up must not change
them. Writes bench/results/profile_check.json. Numbers depend on the machine and its load: export
OMP_NUM_THREADS=1 and read the two trees against each other, not against another day's numbers.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHILD_STARTUP = ("torch_import_s", "calibrate_s", "probe_imports_s")   # and dynamo_import_s, where a tree has it
FULL = False                 # --full: the whole check (training probes included), as `check` without --quick


def one(tree: str, target: str, out: str, t_spawn: float) -> None:
    """One check in this (fresh) interpreter, timed per phase; the numbers go to `out` as JSON."""
    t_top = time.time()
    sys.path.insert(0, tree)
    ph = {"interpreter_s": t_top - t_spawn}
    t = time.perf_counter()
    import harness.cli.main  # noqa: F401  (what the CLI imports before it does anything)
    from harness.api import write_json_atomic
    from harness.engine import build_result
    from harness.runner import Limits, run_child
    ph["parent_imports_s"] = time.perf_counter() - t
    ph["parent_has_torch"] = "torch" in sys.modules
    from harness.assignments import AUTO, for_folder
    path = Path(target)
    assignment = (for_folder(AUTO) if path.is_dir() else None) or AUTO
    events = []
    warm = _warm_html()                   # as the CLI does: the report's one-time costs while the child runs
    try:                                  # as the CLI does: two cores -> the training probes beside the rest
        limits = Limits(timeout_s=600, cores=min(2, os.cpu_count() or 1))
    except TypeError:                     # a baseline tree from before Limits.cores
        limits = Limits(timeout_s=600)
    t_rc = time.perf_counter()
    outcome = run_child(path, assignment=assignment, quick=not FULL, limits=limits,
                        on_event=lambda name: events.append((name, time.perf_counter())))
    ph["run_child_s"] = time.perf_counter() - t_rc
    t = time.perf_counter()
    result = build_result(outcome, str(path), assignment, quick=not FULL)
    ph["rules_s"] = time.perf_counter() - t
    tm = result.get("timings") or {}
    t_load = next((e[1] for e in events if e[0] == "load"), None)
    if t_load is not None:
        # from Popen to the child's first phase: sandbox + interpreter start + the child's fixed costs
        before_load = t_load - t_rc
        ph["child_before_load_s"] = before_load
        if all(k in tm for k in CHILD_STARTUP):
            ph["spawn_and_child_python_s"] = before_load - sum(tm[k] for k in CHILD_STARTUP) - \
                tm.get("dynamo_import_s", 0)
        child_total = outcome.payload.get("timings", {}).get("total_s") if isinstance(outcome.payload, dict) \
            else None
        if isinstance(child_total, (int, float)):
            ph["child_checks_s"] = child_total
            ph["child_exit_and_reap_s"] = ph["run_child_s"] - before_load - child_total
    for k, v in tm.items():
        if k != "total_s" and k != "slowdown":
            ph[f"child:{k}"] = v
    ph["slowdown"] = tm.get("slowdown")
    with tempfile.TemporaryDirectory(prefix="mtxdiag-prof-") as tmp:
        t = time.perf_counter()
        write_json_atomic(result, Path(tmp) / "r.json")
        ph["json_s"] = time.perf_counter() - t
        t = time.perf_counter()
        if warm is not None:
            warm.join()
        ph["html_warm_wait_s"] = time.perf_counter() - t
        t = time.perf_counter()
        try:
            from harness.report import html as html_report
            ph["html_import_s"] = time.perf_counter() - t
            t = time.perf_counter()
            html_report.write(result, Path(tmp) / "r.html", source_path=path)
            ph["html_write_s"] = time.perf_counter() - t
        except ImportError:
            pass
        t = time.perf_counter()
        from harness.report import terminal
        terminal.summary(result, json_path=Path(tmp) / "r.json", html_path=Path(tmp) / "r.html")
        ph["terminal_s"] = time.perf_counter() - t
    diag = [(d.get("id"), d.get("confidence"), (d.get("location") or {}).get("line"))
            for d in result.get("diagnoses", [])]
    Path(out).write_text(json.dumps({"phases": ph, "verdict": result.get("verdict"), "diagnoses": diag}))
    sys.stdout.flush()
    os._exit(0)      # as the CLI's sys.exit does, minus what the harness leaves to teardown (none measured)


def _warm_html():
    """The CLI's own HTML warm-up thread (harness.cli.main._prepare_html), when the tree has one."""
    from harness.cli import main as cli
    return cli._prepare_html() if hasattr(cli, "_prepare_html") else None


def run_one(tree: Path, target: Path) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    try:
        t_spawn = time.time()
        t = time.perf_counter()
        r = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--one", str(tree), str(target), out,
                            repr(t_spawn)] + (["--full"] if FULL else []), cwd=tree, capture_output=True, text=True,
                           timeout=900)
        e2e = time.perf_counter() - t
        if r.returncode != 0:
            raise RuntimeError(f"profile run failed in {tree}: {r.stderr[-2000:]}")
        res = json.loads(Path(out).read_text())
    finally:
        Path(out).unlink(missing_ok=True)
    res["phases"]["e2e_s"] = e2e
    return res


def medians(runs: list[dict]) -> dict:
    keys = dict.fromkeys(k for r in runs for k in r["phases"])
    out = {}
    for k in keys:
        vals = [r["phases"][k] for r in runs if isinstance(r["phases"].get(k), (int, float))
                and not isinstance(r["phases"].get(k), bool)]
        if vals:
            out[k] = round(statistics.median(vals), 3)
        else:
            out[k] = sorted({str(r["phases"].get(k)) for r in runs})
    return out


def lm_repo(tmp: Path) -> Path:
    sys.path.insert(0, str(ROOT))
    from mutants.lm_export import reference_repo_files
    repo = tmp / "reference_lm_repo"
    for rel, text in reference_repo_files().items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    return repo


def main():
    global FULL
    FULL = "--full" in sys.argv
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        return one(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]))
    ap = argparse.ArgumentParser()
    ap.add_argument("targets", nargs="*")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--full", action="store_true", help="the full check (training probes), not --quick")
    ap.add_argument("--baseline", default=None, help="another checkout; runs alternate with this one")
    ap.add_argument("--out", default=None, help="default: bench/results/profile_check[_full].json")
    a = ap.parse_args()
    a.out = a.out or str(ROOT / "bench" / "results" / ("profile_check_full.json" if a.full else "profile_check.json"))
    trees = {"this": ROOT} | ({"baseline": Path(a.baseline).resolve()} if a.baseline else {})
    with tempfile.TemporaryDirectory(prefix="mtxdiag-prof-") as tmp:
        targets = [Path(t).resolve() for t in a.targets] or [ROOT / "submissions" / "reversal_lesson.py",
                                                              lm_repo(Path(tmp))]
        runs = {(str(t), name): [] for t in targets for name in trees}
        for i in range(a.repeat):
            for t in targets:
                order = list(trees.items()) if i % 2 == 0 else list(trees.items())[::-1]
                for name, tree in order:
                    r = run_one(tree, t)
                    runs[(str(t), name)].append(r)
                    print(f"run {i + 1} {t.name} [{name}]: e2e {r['phases']['e2e_s']:.2f} s, verdict {r['verdict']}",
                          file=sys.stderr)
    report = []
    for t in targets:
        row = {"target": t.name, "repeat": a.repeat}
        for name in trees:
            rs = runs[(str(t), name)]
            row[name] = medians(rs)
            row[f"{name}_diagnoses"] = sorted({json.dumps(r["diagnoses"]) for r in rs})
        if a.baseline:
            row["same_diagnoses"] = row["this_diagnoses"] == row["baseline_diagnoses"]
        report.append(row)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(report, indent=2) + "\n")
    for row in report:
        print(f"\n{row['target']} (medians of {a.repeat}, seconds)")
        keys = dict.fromkeys(k for name in trees for k in row[name])
        print(f"  {'phase':32s}" + "".join(f"{n:>10s}" for n in trees))
        for k in keys:
            cells = [row[n].get(k, "-") for n in trees]
            print(f"  {k:32s}" + "".join(f"{c:>10.3f}" if isinstance(c, float) else f"{str(c):>10s}"
                                         for c in cells))
        if a.baseline:
            print(f"  same diagnoses in every run: {row['same_diagnoses']}")
    print(f"\nwrote {a.out}")


if __name__ == "__main__":
    main()
