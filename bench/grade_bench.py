"""Batch-grading throughput: N submissions graded with --jobs 1 and --jobs 2 (and any other counts given).

    python bench/grade_bench.py                 # 20 submissions, --quick checks, jobs 1 and 2, once each
    python bench/grade_bench.py --repeat 3      # medians of three runs
    python bench/grade_bench.py --full          # the full check (training probes), much slower
    python bench/grade_bench.py --jobs 2 --dask 1,2   # and a local Dask cluster of 1 and of 2 workers
    python bench/grade_bench.py --cold          # each setting also cold (a new interpreter per submission)

Checks run in warm workers (harness/isolation/warm.py), as `grade` runs them; `--cold` adds the same settings with
`--cold`, alternating with the warm ones, and reports warm against cold.

The class is a mix of reference copies and exported mutants (the same set every
time). Every run grades into a fresh output folder (nothing reused from a cache).
Prints submissions per minute and the speed-up over the first job count, and
writes the numbers to bench/results/grade_bench.json (git-ignored).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import mutants  # noqa: E402
from harness import __version__  # noqa: E402
from harness.grading.grade import Grader, Options  # noqa: E402

MUTANT_IDS = ("reversal-causal-mask-missing", "reversal-target-not-shifted", "reversal-missing-sqrt-dk",
              "reversal-no-warmup", "reversal-encoder-in-decode-loop", "reversal-softmax-wrong-dim",
              "reversal-missing-residual", "reversal-pad-not-ignored", "reversal-stale-mask",
              "reversal-source-ignored", "reversal-heads-split-wrong", "reversal-data-not-reversed")


def make_class(folder: Path, n: int) -> dict:
    """n submissions: half reference copies, half mutants (cycling through MUTANT_IDS)."""
    folder.mkdir(parents=True)
    reference = (ROOT / "reference_model" / "reversal.py").read_text()
    kinds = {}
    n_mut = n // 2
    for i in range(n_mut):
        m = mutants.get(MUTANT_IDS[i % len(MUTANT_IDS)])
        name = f"student_{i:02d}"
        (folder / f"{name}.py").write_text(mutants.source(m))
        kinds[name] = m.id
    for i in range(n_mut, n):
        name = f"student_{i:02d}"
        (folder / f"{name}.py").write_text(reference)
        kinds[name] = "reference"
    return kinds


def one_run(src: Path, work: Path, jobs: int, quick: bool, timeout: float, memory: int,
            scheduler: str | None = None, warm: bool = True) -> dict:
    out = work / f"out-j{jobs}-{time.monotonic_ns()}"
    load0 = _load()
    t0 = time.monotonic()
    summary = Grader(src, out, options=Options(quick=quick, jobs=jobs, timeout_s=timeout, memory_mb=memory,
                                               force=True, scheduler=scheduler, warm=warm),
                     progress=False).run()
    wall = time.monotonic() - t0
    verdicts = {}
    for row in summary.rows:
        verdicts[row["verdict"]] = verdicts.get(row["verdict"], 0) + 1
    shutil.rmtree(out, ignore_errors=True)
    return {"wall_s": round(wall, 2), "graded": len(summary.graded), "verdicts": verdicts,
            "grader_faults": len(summary.grader_faults), "load_before": load0, "load_after": _load()}


def _cluster(workers: int):
    """A local Dask cluster: `workers` processes of one thread each."""
    from distributed import LocalCluster
    return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)


def _load():
    """The 1-minute load average: other work on the machine skews the numbers."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20, help="number of submissions (default 20)")
    ap.add_argument("--jobs", default="1,2", help="comma-separated job counts (default 1,2)")
    ap.add_argument("--dask", default="", help="comma-separated worker counts of a local Dask cluster (one thread "
                                               "each) to grade with too, e.g. 1,2; reported as dask1, dask2")
    ap.add_argument("--repeat", type=int, default=1, help="runs per job count; medians are reported")
    ap.add_argument("--full", action="store_true", help="full checks (training probes) instead of --quick")
    ap.add_argument("--cold", action="store_true", help="also grade every setting cold (--cold), for comparison")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--memory", type=int, default=6144)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "grade_bench.json")
    args = ap.parse_args(argv)
    job_counts = [int(j) for j in args.jobs.split(",") if j.strip()]
    quick = not args.full

    work = Path(tempfile.mkdtemp(prefix="mtxdiag-grade-bench-"))
    try:
        src = work / "class"
        kinds = make_class(src, args.n)
        results = {}
        settings = [str(j) for j in job_counts] + [f"dask{w.strip()}" for w in args.dask.split(",") if w.strip()]
        labels = [s + m for s in settings for m in (["", "-cold"] if args.cold else [""])]
        for setting in settings:
            jobs, cluster = (int(setting), None) if not setting.startswith("dask") else \
                (1, _cluster(int(setting[4:])))
            runs = {s: [] for s in labels if s.split("-")[0] == setting}
            for r in range(args.repeat):       # warm and cold alternate: the machine's drift hits both
                for label in runs:
                    res = one_run(src, work, jobs, quick, args.timeout, args.memory,
                                  cluster.scheduler_address if cluster else None, warm=not label.endswith("-cold"))
                    runs[label].append(res)
                    print(f"{label} run {r + 1}/{args.repeat}: {res['wall_s']:.1f} s for {res['graded']} "
                          f"submissions ({60 * res['graded'] / res['wall_s']:.2f}/min) verdicts={res['verdicts']} "
                          f"load {res['load_before']} -> {res['load_after']}", flush=True)
            if cluster is not None:
                cluster.close()
            for label, rs in runs.items():
                med = statistics.median(x["wall_s"] for x in rs)
                results[label] = {"runs": rs, "median_wall_s": round(med, 2),
                                  "submissions_per_minute": round(60 * args.n / med, 2)}
        for label in labels:        # against the first job count; a Dask cluster against one Dask worker
            mode = "-cold" if label.endswith("-cold") else ""
            first = "dask1" + mode if label.startswith("dask") and "dask1" + mode in results else settings[0] + mode
            results[label]["speedup"] = round(results[first]["median_wall_s"] / results[label]["median_wall_s"], 2)
            if not mode and label + "-cold" in results:
                results[label]["vs_cold"] = round(results[label + "-cold"]["median_wall_s"] /
                                                  results[label]["median_wall_s"], 2)
        report = {"benchmark": "grade", "harness_version": __version__, "n": args.n, "quick": quick,
                  "repeat": args.repeat, "timeout_s": args.timeout, "memory_mb": args.memory,
                  "class": {"reference": sum(1 for k in kinds.values() if k == "reference"),
                            "mutants": sorted({k for k in kinds.values() if k != "reference"})},
                  "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                              "platform": platform.platform()},
                  "results": results, "when": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        print()
        print(f"{args.n} submissions, {'quick' if quick else 'full'} checks, {os.cpu_count()} CPUs")
        for label in labels:
            r = results[label]
            setting, cold = label.split("-")[0], label.endswith("-cold")
            name = f"--jobs {setting}" if not setting.startswith("dask") else f"Dask, {setting[4:]} worker(s)"
            name += " --cold" if cold else " (warm)"
            vs = f"  x{r['vs_cold']:.2f} cold" if "vs_cold" in r else ""
            print(f"  {name:26s}: {r['median_wall_s']:7.1f} s  {r['submissions_per_minute']:6.2f} submissions/min"
                  f"  speed-up x{r['speedup']:.2f}{vs}")
        print(f"written to {args.out}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
