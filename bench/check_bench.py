"""Benchmark `mtxdiag check`: full and --quick, on the reference and a spread of mutants.

    python bench/check_bench.py [--repeat 3] [--no-baseline]

Prints median / min / max seconds per mode, the HTML render time separately, and the ratio against one
run of the lesson's own 3000-step training measured in the same run (the cost a student pays to find out
by training). Writes bench/results/check_bench.json. Numbers depend on the machine and its load: compare
ratios measured in the same run, not absolute seconds across machines.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.api import check_file  # noqa: E402

SPREAD = ("reversal-softmax-wrong-dim", "reversal-target-not-shifted", "reversal-source-ignored",
          "reversal-view-not-contiguous", "reversal-no-warmup")

BASELINE = """
import time, torch
from reference_model import reversal as r
torch.manual_seed(0)
t = time.perf_counter()
r.train(r.MiniTransformer(), steps=3000, log_every=10**9)
print(time.perf_counter() - t)
"""


def stats(xs):
    return {"median": round(statistics.median(xs), 2), "min": round(min(xs), 2), "max": round(max(xs), 2),
            "n": len(xs)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-baseline", action="store_true")
    a = ap.parse_args()
    from mutants import get, source
    with tempfile.TemporaryDirectory() as tmp:
        files = [ROOT / "reference_model" / "reversal.py"]
        for mid in SPREAD:
            p = Path(tmp) / f"{mid}.py"
            p.write_text(source(get(mid)))
            files.append(p)
        out = {"quick": [], "full": [], "render": []}
        for mode in ("quick", "full"):
            for _ in range(a.repeat):
                for f in files:
                    t = time.perf_counter()
                    r = check_file(f, quick=(mode == "quick"))
                    out[mode].append(time.perf_counter() - t)
                    try:
                        from harness.report import html
                        t = time.perf_counter()
                        html.render(r, source_path=f)
                        out["render"].append(time.perf_counter() - t)
                    except Exception as e:  # the report is measured separately and must not stop the bench
                        print("render failed:", e, file=sys.stderr)
                    print(f"{mode} {f.name}: {out[mode][-1]:.1f} s", file=sys.stderr)
    summary = {k: stats(v) for k, v in out.items() if v}
    if not a.no_baseline:
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", BASELINE], cwd=ROOT, capture_output=True, text=True)
        base = float(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else time.perf_counter() - t
        summary["lesson_training_3000_steps_s"] = round(base, 1)
        for mode in ("quick", "full"):
            summary[f"{mode}_median_over_training"] = round(summary[mode]["median"] / base, 3)
    print(json.dumps(summary, indent=2))
    (ROOT / "bench" / "results").mkdir(parents=True, exist_ok=True)
    (ROOT / "bench" / "results" / "check_bench.json").write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
