"""Issue 45 item 6: what warm split runs (isolation/warm_split.py) save, paired on one machine.

1. `grade --quick --jobs 2` of a small CS231n class (N copies of the reference in the course's layout and the first
   M mutants exported by `mutants export --assignment cs231n`), before (MTXDIAG_WARM_SPLIT=0: a pack's split run
   cold in a warm slot, as on main; or --before-tree: the grade command of another checkout) and after (warm split
   runs), the order alternating per round; each run's checks (id, status, line) per student compared.
2. One quick check of the reference, warm (a started slot) and cold, alternating: the per-submission time.

`--assignment block`: the one-file pack split by default since issue 45 (Pack.split "on"); the class is copies of
reference_model/block.py and exported block mutants, "before" is its run in one process (MTXDIAG_PACK_SPLIT=0,
warm as before the move) and "after" the warm split run.

Prints each time and, last, one JSON line with the medians.

    python bench/warm_split.py [--assignment cs231n|block] [--rounds 3] [--copies 6] [--mutants 2] [--checks 5]
                               [--before-tree DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.pack_split import reference_folder  # noqa: E402
from harness import api  # noqa: E402
from harness.isolation import warm  # noqa: E402
from harness import assignments  # noqa: E402
from harness.isolation import split  # noqa: E402
from harness.isolation.warm_split import SWITCH  # noqa: E402
from harness.packs.cs231n.pack import PACK  # noqa: E402

BLOCK = ROOT / "reference_model" / "block.py"
from harness.protocol import Limits  # noqa: E402


def make_class(root: Path, copies: int, mutants: int, name: str = PACK.name) -> Path:
    klass = root / "class"
    klass.mkdir(parents=True)
    for i in range(copies):
        if name == PACK.name:
            reference_folder(klass / f"ref_{i:02d}")
        else:
            shutil.copyfile(BLOCK, klass / f"ref_{i:02d}.py")
    exported = root / "exported"
    subprocess.run([sys.executable, "-m", "harness", "mutants", "export", "--assignment", name, str(exported)],
                   check=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.DEVNULL)
    for d in sorted(p for p in exported.iterdir() if p.is_dir() or p.suffix == ".py")[:mutants]:
        if d.is_dir():
            shutil.copytree(d, klass / f"mut_{d.name}")
        elif d.suffix == ".py":
            shutil.copyfile(d, klass / f"mut_{d.name}")
    return klass


def grade(klass: Path, out: Path, after: bool, tree: Path, name: str = PACK.name) -> tuple[float, dict]:
    switch = SWITCH if assignments.folder_pack_of(name) else split.SWITCH      # block: before = one process
    env = dict(os.environ, PYTHONPATH=str(tree), **{switch: "1" if after else "0"})
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "harness", "grade", str(klass), "--quick", "--jobs", "2", "--out", str(out),
                    "--no-progress", "--assignment", name], check=True, cwd=out.parent, env=env,
                   stdout=subprocess.DEVNULL)
    took = time.perf_counter() - t
    checks = {}
    for f in sorted((out / "students").glob("*/result.json")):
        r = json.loads(f.read_text())
        checks[f.parent.name] = [(c["id"], c["status"], (c.get("location") or {}).get("line"))
                                 for c in r.get("checks") or []]
    return took, checks


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--assignment", default=PACK.name, choices=(PACK.name, "block"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--copies", type=int, default=6)
    ap.add_argument("--mutants", type=int, default=2)
    ap.add_argument("--checks", type=int, default=5, help="rounds of the per-submission comparison")
    ap.add_argument("--before-tree", type=Path, help="the checkout whose grade is 'before' (default: this one with "
                                                     f"{SWITCH}=0)")
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="warm-split-bench-"))
    klass = make_class(root, a.copies, a.mutants, a.assignment)
    times: dict = {"before": [], "after": []}
    same = True
    for i in range(a.rounds):
        got = {}
        for after in ((False, True) if i % 2 == 0 else (True, False)):
            key = "after" if after else "before"
            tree = a.before_tree.resolve() if a.before_tree and not after else ROOT
            took, got[key] = grade(klass, root / f"out_{key}", after, tree, a.assignment)
            times[key].append(took)
            print(f"round {i + 1} grade {key}: {took:.2f} s ({len(got[key])} students)", flush=True)
        same = same and got["before"] == got["after"] and len(got["after"]) == a.copies + a.mutants
        for who in sorted(set(got["before"]) | set(got["after"])):
            b, f = set(got["before"].get(who, [])), set(got["after"].get(who, []))
            if b != f:
                print(f"  {who}: only before {sorted(b - f, key=str)}; only after {sorted(f - b, key=str)}", flush=True)
    one = {"cold": [], "warm": []}
    folder = klass / ("ref_00" if a.assignment == PACK.name else "ref_00.py")
    name = a.assignment
    lims = {"cold": Limits(), "warm": Limits(warm=True)}
    if a.checks:
        api.check_file(folder, assignment=name, quick=True, limits=lims["warm"])      # the slot started
    for i in range(a.checks):
        for key in (("cold", "warm") if i % 2 == 0 else ("warm", "cold")):
            t = time.perf_counter()
            api.check_file(folder, assignment=name, quick=True, limits=lims[key])
            one[key].append(time.perf_counter() - t)
            print(f"round {i + 1} check {key}: {one[key][-1]:.2f} s", flush=True)
    warm.close_all()
    med = {k: statistics.median(v) for k, v in times.items()}
    per = {k: round(statistics.median(v), 2) if v else None for k, v in one.items()}
    n = a.copies + a.mutants
    print(json.dumps({"students": n, "rounds": a.rounds, "grade_before_s": round(med["before"], 2),
                      "grade_after_s": round(med["after"], 2), "grade_ratio": round(med["after"] / med["before"], 3),
                      "per_minute_before": round(60 * n / med["before"], 1),
                      "per_minute_after": round(60 * n / med["after"], 1), "same_checks": same,
                      "check_cold_s": per["cold"], "check_warm_s": per["warm"],
                      "times": {k: [round(x, 2) for x in v] for k, v in {**times, **one}.items()}}))
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
