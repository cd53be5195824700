"""The cost of issue 45's split for a pack's folder: a quick `cs231n` check in one process (MTXDIAG_PACK_SPLIT=0,
as before) and split (the model server and the prober), paired: each round runs both, the order alternating,
on the same folder (the team's reference in the course's layout, or --folder). Prints each time and, last, one
JSON line: the medians, their ratio, and whether the two gave the same checks (id, status, line) every time.
With --breakdown, where the time goes, medians per mode: the parent's clock to the child's 'load' phase (process
start, interpreter, imports: the prober's own start-up split, the server's beside it) and to the end; the
child's timings (torch and dynamo import, calibration, probe imports, load, the probes); split, the model
server's round trips (requests per op, the seconds the prober waited for their answers and, of those, the
seconds the server says it worked on them: the rest is the wire's and the scheduler's).

    python bench/pack_split.py [--rounds 5] [--folder DIR] [--full] [--breakdown]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import api  # noqa: E402
from harness.isolation.split import SWITCH  # noqa: E402
from harness.packs.cs231n import reference  # noqa: E402
from harness.packs.cs231n.pack import LAYERS, MODELS, PACK  # noqa: E402


def reference_folder(root: Path) -> Path:
    files = {LAYERS: Path(reference.__file__).read_text(), "cs231n/__init__.py": "",
             "cs231n/classifiers/__init__.py": "",
             MODELS: "from ..transformer_layers import CaptioningTransformer, VisionTransformer  # noqa: F401\n"}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


STEPS = ("torch_import_s", "dynamo_import_s", "calibrate_s", "probe_imports_s", "load_s")


def one(folder: Path, split: bool, quick: bool, parts: dict | None = None) -> tuple[float, list]:
    """One check's wall time and its checks; `parts` (a dict) gets its breakdown (see the module's text)."""
    os.environ[SWITCH] = "1" if split else "0"
    t = time.perf_counter()
    seen: dict = {}
    r = api.check_file(folder, assignment=PACK.name, quick=quick,
                       on_event=lambda name: seen.setdefault(name, time.perf_counter() - t))
    took = time.perf_counter() - t
    if parts is not None:
        tm = r.get("timings") or {}
        parts.update({"wall_s": took, "to_load_phase_s": seen.get("load", float("nan"))})
        parts.update({k: tm.get(k, 0.0) for k in STEPS})
        parts["probes_s"] = sum(v for k, v in tm.items() if isinstance(v, float) and k not in NOT_PROBES
                                and not k.startswith("server."))
        parts["server_requests"] = sum(v for k, v in tm.items() if k.startswith("server.") and not k.endswith("_s"))
        parts["server_wait_s"] = sum(v for k, v in tm.items() if k.startswith("server.") and k.endswith("_s")
                                     and not k.endswith("_work_s"))
        parts["server_work_s"] = sum(v for k, v in tm.items() if k.startswith("server.") and k.endswith("_work_s"))
        parts.update({k: v for k, v in tm.items() if k.startswith("server.")})
    return took, [(c["id"], c["status"], (c.get("location") or {}).get("line")) for c in r["checks"]]


NOT_PROBES = set(STEPS) | {"total_s", "slowdown", "gated", "side_process"}     # the rest of the timings: probes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--folder", type=Path)
    ap.add_argument("--full", action="store_true", help="a full check, not --quick")
    ap.add_argument("--breakdown", action="store_true", help="where the time goes, per mode (medians)")
    a = ap.parse_args()
    parts: dict = {"one": [], "split": []}
    folder = a.folder or reference_folder(Path(tempfile.mkdtemp(prefix="pack-split-")))
    times: dict = {"one": [], "split": []}
    same = True
    for i in range(a.rounds):
        got = {}
        for split in ((False, True) if i % 2 == 0 else (True, False)):
            key = "split" if split else "one"
            part: dict = {}
            took, checks = one(folder, split, not a.full, part)
            parts[key].append(part)
            times[key].append(took)
            got[key] = checks
            print(f"round {i + 1} {key}: {took:.2f} s", flush=True)
        same = same and got["one"] == got["split"]
        if got["one"] != got["split"]:
            print("differ:", sorted(set(got["one"]) ^ set(got["split"])), flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    if a.breakdown:
        for key, rows in parts.items():
            names = sorted({n for r in rows for n in r})
            print(key, json.dumps({n: round(statistics.median(r.get(n, 0.0) for r in rows), 3) for n in names}))
    print(json.dumps({"rounds": a.rounds, "quick": not a.full, "median_one_process_s": round(med["one"], 2),
                      "median_split_s": round(med["split"], 2), "ratio": round(med["split"] / med["one"], 3),
                      "same_checks": same, "times": {k: [round(x, 2) for x in v] for k, v in times.items()}}))


if __name__ == "__main__":
    main()
