"""How long a check of a file whose class body never ends takes, end to end (issue 14).

    python bench/load_limit_bench.py [--repeat 3] [--load-timeout 30]

Runs `python -m harness check` on a file whose class body loops forever, --repeat times, and reports medians of:
  * wall_s: from the command's start to its exit, as a user sees it;
  * before_load_s: the child's set-up before the submission's first line (torch, torch._dynamo, calibration,
    the probes' imports, from the JSON `timings`);
  * load_s: how long loading ran before the load limit stopped it (the child's clock);
  * rest_s: wall_s - before_load_s - load_s (parent start, sandbox start, writing the reports).
The load limit bounds load_s; wall_s is the limit plus the machine's fixed costs (issue 14 asks for <= 35 s
with the default 30 s limit on an idle machine). Every run must end as `timeout`. Writes
bench/results/load_limit_bench.json.
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
SPIN = "import torch.nn as nn\n\n\nclass MiniTransformer(nn.Module):\n    n = 0\n    while True:\n        n += 1\n"


def one(tmp: Path, load_timeout: float) -> dict:
    f = tmp / "spin.py"
    f.write_text(SPIN)
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "harness", "check", str(f), "--json", str(tmp / "r.json"),
                           "--html", str(tmp / "r.html"), "--load-timeout", str(load_timeout)],
                          cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t
    res = json.loads((tmp / "r.json").read_text())
    tm = res.get("timings") or {}
    before = sum(tm.get(k, 0.0) for k in ("torch_import_s", "dynamo_import_s", "calibrate_s", "probe_imports_s"))
    first = (res.get("diagnoses") or [{}])[0].get("id")
    return {"wall_s": wall, "before_load_s": before, "load_s": tm.get("load_s", float("nan")),
            "rest_s": wall - before - tm.get("load_s", 0.0), "diagnosis": first, "exit": proc.returncode}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--load-timeout", type=float, default=30.0)
    a = ap.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as d:
        for i in range(a.repeat):
            r = one(Path(d), a.load_timeout)
            runs.append(r)
            print(f"run {i + 1}: " + "  ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                               for k, v in r.items()), flush=True)
    med = {k: round(statistics.median(r[k] for r in runs), 2) for k in ("wall_s", "before_load_s", "load_s", "rest_s")}
    ok = all(r["diagnosis"] == "timeout" for r in runs)
    print(f"median over {len(runs)}: " + "  ".join(f"{k} {v}" for k, v in med.items())
          + f"   all ended as timeout: {ok}")
    out = ROOT / "bench" / "results" / "load_limit_bench.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"load_timeout_s": a.load_timeout, "median": med, "all_timeout": ok, "runs": runs},
                              indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
