"""`mtxdiag check` as a student runs it, with and without the per-user check daemon (issue 14).

    python bench/daemon_bench.py [--repeat 5] [--first 3] [--full] [FILE_OR_REPO ...]

Every run is the real command line (`python -m harness check TARGET --quick`, its own interpreter, JSON and
HTML written), timed from spawning it to its exit, with a private runtime folder for the daemon
(MTXDIAG_RUNTIME_DIR). Three kinds of run, on the same machine and interleaved so that they see the same
load:

* `cold`: `--no-daemon`, a new sandboxed interpreter (what every check did before the daemon);
* `warm`: the daemon is already up (the second and every later check within its idle time);
* `first`: no daemon is running: the check runs cold and then starts the daemon (the first check of a
  session), measured `--first` times, each after `mtxdiag daemon stop`; the next timed run waits until the
  daemon has its warm worker (a check sent during that warm-up waits for it, and is not measured here).

Medians per kind, the ratio warm/cold, the child's own `total_s` and the machine's `slowdown` (the child's
calibration: 1.0 on the machine the budgets were set on), and the diagnoses (id, confidence, line) of
every run, which must be identical across kinds. Without targets: the lesson's code and the reference
exported as an `lm` repository. Writes bench/results/daemon_bench[_full].json.
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
sys.path.insert(0, str(ROOT / "bench"))
from profile_check import lm_repo  # noqa: E402


def run(target: Path, kind: str, env: dict, tmp: Path, full: bool) -> dict:
    out = tmp / f"r-{time.monotonic_ns()}"
    cmd = [sys.executable, "-m", "harness", "check", str(target), "--json", f"{out}.json", "--html",
           f"{out}.html"] + ([] if full else ["--quick"]) + (["--no-daemon"] if kind == "cold" else [])
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    e2e = time.perf_counter() - t
    if p.returncode not in (0, 1):
        raise RuntimeError(f"{kind} check failed: {p.stderr[-2000:]}")
    result = json.loads(Path(f"{out}.json").read_text())
    tm = result.get("timings") or {}
    return {"e2e_s": e2e, "child_total_s": tm.get("total_s"), "slowdown": tm.get("slowdown"),
            "torch_import_s": tm.get("torch_import_s"), "said": [ln for ln in p.stderr.splitlines() if "daemon" in ln],
            "diagnoses": [(d.get("id"), d.get("confidence"), (d.get("location") or {}).get("line"))
                          for d in result.get("diagnoses", [])]}


def stop(env: dict) -> None:
    subprocess.run([sys.executable, "-m", "harness", "daemon", "stop"], cwd=ROOT, env=env, capture_output=True,
                   timeout=60)
    time.sleep(0.5)        # let it close its worker before the next run's clock starts


def wait_ready(env: dict, within: float = 120.0) -> None:
    """Until the daemon a first check started has its warm worker (a check sent earlier waits for it)."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        p = subprocess.run([sys.executable, "-m", "harness", "daemon", "status"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=60)
        if "1 idle worker" in p.stdout:
            return
        time.sleep(0.5)
    raise RuntimeError("the daemon did not get ready")


def med(rows: list[dict], key: str):
    vals = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return round(statistics.median(vals), 3) if vals else None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("targets", nargs="*")
    ap.add_argument("--repeat", type=int, default=5, help="cold and warm runs each, per target")
    ap.add_argument("--first", type=int, default=3, help="runs that start the daemon, per target")
    ap.add_argument("--full", action="store_true", help="the full check, not --quick")
    a = ap.parse_args()
    report = []
    with tempfile.TemporaryDirectory(prefix="mtxd-bench-") as tmp:
        tmp = Path(tmp)
        rt = tmp / "rt"
        rt.mkdir(mode=0o700)
        env = dict(os.environ, MTXDIAG_RUNTIME_DIR=str(rt), MTXDIAG_DAEMON="1")
        targets = [Path(t).resolve() for t in a.targets] or [ROOT / "submissions" / "reversal_lesson.py",
                                                              lm_repo(tmp)]
        try:
            for target in targets:
                rows = {"cold": [], "warm": [], "first": []}
                stop(env)
                up = False                 # whether a daemon answers now
                for i in range(max(a.repeat, a.first)):
                    if i < a.first:
                        stop(env)
                        rows["first"].append(run(target, "first", env, tmp, a.full))
                        wait_ready(env)
                        up = True
                    for kind in (("cold", "warm") if i % 2 == 0 else ("warm", "cold")):
                        if i < a.repeat:
                            if kind == "warm" and not up:      # not timed: it starts the daemon
                                run(target, "first", env, tmp, a.full)
                                wait_ready(env)
                                up = True
                            rows[kind].append(run(target, kind, env, tmp, a.full))
                    print(f"{target.name} run {i + 1}: " + ", ".join(f"{k} {v[-1]['e2e_s']:.2f} s" for k, v in rows.items()
                                                                     if v), file=sys.stderr)
                row = {"target": target.name, "quick": not a.full}
                for kind, rs in rows.items():
                    row[kind] = {k: med(rs, k) for k in ("e2e_s", "child_total_s", "slowdown", "torch_import_s")}
                    row[kind]["n"] = len(rs)
                    row[kind]["said"] = sorted({s for r in rs for s in r["said"]})
                if row["cold"]["e2e_s"] and row["warm"]["e2e_s"]:
                    row["warm_over_cold"] = round(row["warm"]["e2e_s"] / row["cold"]["e2e_s"], 3)
                diag = {json.dumps(r["diagnoses"]) for rs in rows.values() for r in rs}
                row["diagnoses"] = sorted(diag)
                row["same_diagnoses"] = len(diag) == 1
                report.append(row)
        finally:
            stop(env)
    out = ROOT / "bench" / "results" / ("daemon_bench_full.json" if a.full else "daemon_bench.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    for row in report:
        print(f"\n{row['target']} ({'quick' if row['quick'] else 'full'} check, medians, seconds)")
        for kind in ("cold", "warm", "first"):
            r = row[kind]
            print(f"  {kind:6s} e2e {r['e2e_s']}  child {r['child_total_s']}  slowdown {r['slowdown']}  (n={r['n']})")
        print(f"  warm/cold {row.get('warm_over_cold')}  same diagnoses: {row['same_diagnoses']}")
    print(f"\nwrote {out}")
    return 0 if all(r["same_diagnoses"] for r in report) else 1


if __name__ == "__main__":
    sys.exit(main())
