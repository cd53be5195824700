"""A re-check under `mtxdiag watch` against a cold `mtxdiag check`, in the same run (issue 14).

    python bench/watch_bench.py [--repeat 5] [--full] [FILE_OR_REPO]

A student re-runs the check after every edit. This starts `python -m harness watch` on a copy of FILE (default:
the lesson, submissions/reversal_lesson.py) and then, --repeat times, alternately:
  * cold: `python -m harness check` on a second copy, as a fresh command (what a re-run costs without watch);
  * warm: appends a comment to the watched copy (an edit that changes no line of code) and waits for the re-check.
Both are measured from the user's side: `to_summary` is the time until the verdict line is printed (the
diagnoses are on screen), `to_report` until the HTML report is written (for watch: from the save, so it
includes the poll interval and the settle time, 2 x --interval). The diagnoses (id, confidence, line) of every
run must be the same. Medians; the ratio warm / cold is the number to read (the machine's load changes from day
to day, the ratio much less). Writes bench/results/watch_bench.json.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERDICT = re.compile(r"^\s?(CLEAN|PROBLEMS|ERROR)\s")
INTERVAL = 0.1


def _reader(proc, lines: queue.Queue) -> None:
    for line in proc.stdout:
        lines.put((time.perf_counter(), line.rstrip("\n")))
    lines.put((time.perf_counter(), None))


def _until(lines: queue.Queue, pattern: str, timeout: float = 900) -> float:
    """The time at which a line containing `pattern` (or matching VERDICT, for 'VERDICT') arrived."""
    deadline = time.monotonic() + timeout
    while True:
        t, line = lines.get(timeout=max(1.0, deadline - time.monotonic()))
        if line is None:
            raise RuntimeError(f"the command ended before printing {pattern!r}")
        if (VERDICT.search(line) if pattern == "VERDICT" else pattern in line):
            return t


def _diagnoses(path: Path) -> list:
    r = json.loads(path.read_text())
    return [(d.get("id"), d.get("confidence"), (d.get("location") or {}).get("line")) for d in r.get("diagnoses", [])]


def cold(target: Path, tmp: Path, quick: bool) -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    args = [sys.executable, "-m", "harness", "check", str(target), "--json", str(tmp / "cold.json"),
            "--html", str(tmp / "cold.html")] + (["--quick"] if quick else [])
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    lines = queue.Queue()
    threading.Thread(target=_reader, args=(proc, lines), daemon=True).start()
    t_sum = _until(lines, "VERDICT")
    t_rep = _until(lines, "report ")
    proc.wait(timeout=600)
    return {"to_summary_s": t_sum - t0, "to_report_s": t_rep - t0, "exit_s": time.perf_counter() - t0,
            "diagnoses": _diagnoses(tmp / "cold.json")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("target", nargs="?", default=str(ROOT / "submissions" / "reversal_lesson.py"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--full", action="store_true", help="full checks (training probes) instead of --quick")
    a = ap.parse_args()
    src = Path(a.target).resolve()
    quick = not a.full
    with tempfile.TemporaryDirectory(prefix="mtxdiag-watch-bench-") as tmp:
        tmp = Path(tmp)
        watched, other = tmp / ("w" + ("" if src.is_dir() else src.suffix)), tmp / ("c" + ("" if src.is_dir() else
                                                                                          src.suffix))
        for dst in (watched, other):
            (shutil.copytree if src.is_dir() else shutil.copyfile)(src, dst)
        edit = (watched / "tests" / "adapters.py") if src.is_dir() else watched
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "harness", "watch", str(watched), "--json",
                                 str(tmp / "warm.json"), "--html", str(tmp / "warm.html"), "--interval",
                                 str(INTERVAL)] + ([] if quick else ["--full"]),
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        lines = queue.Queue()
        threading.Thread(target=_reader, args=(proc, lines), daemon=True).start()
        first = _until(lines, "watching") - t0
        print(f"watch: first check (starts the warm worker) {first:.2f} s")
        runs = {"cold": [], "warm": []}
        try:
            for i in range(a.repeat):
                c = cold(other, tmp, quick)
                runs["cold"].append(c)
                t = time.perf_counter()
                with open(edit, "a") as f:
                    f.write(f"\n# edit {i}\n")
                t_sum = _until(lines, "VERDICT")
                t_rep = _until(lines, "report ")
                _until(lines, "watching")
                w = {"to_summary_s": t_sum - t, "to_report_s": t_rep - t, "diagnoses": _diagnoses(tmp / "warm.json")}
                runs["warm"].append(w)
                print(f"run {i + 1}: cold summary {c['to_summary_s']:.2f} s, report {c['to_report_s']:.2f} s, "
                      f"exit {c['exit_s']:.2f} s | watch re-check summary {w['to_summary_s']:.2f} s, "
                      f"report {w['to_report_s']:.2f} s")
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    diags = {json.dumps(r["diagnoses"]) for k in runs for r in runs[k]}
    med = {k: {m: statistics.median(r[m] for r in runs[k]) for m in runs[k][0] if m.endswith("_s")} for k in runs}
    out = {"target": str(src), "quick": quick, "repeat": a.repeat, "interval_s": INTERVAL, "first_watch_check_s": first,
           "median": med, "ratio_warm_over_cold": {m: med["warm"][m] / med["cold"][m] for m in med["warm"]},
           "same_diagnoses": len(diags) == 1, "diagnoses": json.loads(next(iter(diags))) if diags else None,
           "runs": runs}
    print(f"\nmedians of {a.repeat}: cold check summary {med['cold']['to_summary_s']:.2f} s, report "
          f"{med['cold']['to_report_s']:.2f} s | watch re-check summary {med['warm']['to_summary_s']:.2f} s, report "
          f"{med['warm']['to_report_s']:.2f} s | warm/cold {out['ratio_warm_over_cold']['to_summary_s']:.2f} "
          f"(summary), {out['ratio_warm_over_cold']['to_report_s']:.2f} (report); same diagnoses: "
          f"{out['same_diagnoses']}")
    res = ROOT / "bench" / "results"
    res.mkdir(exist_ok=True)
    (res / "watch_bench.json").write_text(json.dumps(out, indent=2))
    if not out["same_diagnoses"]:
        sys.exit("the diagnoses differ between runs")


if __name__ == "__main__":
    main()
