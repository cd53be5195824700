"""What the per-run limits cost (issue 45): a quick check of the reference, cold and warm (the second run of one
warm worker), with the wall time and the grading process's own CPU time (where the watches run: robust on a
loaded machine), for one or more source trees, paired: the trees alternate, ROUNDS times, each in a fresh process.

    python bench/limits_cost.py [--rounds 3] TREE [TREE ...]     # e.g. a checkout of the base commit and this one
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time


def one(tree: str) -> dict:
    from harness.api import check_file
    from harness.runner import Limits
    out = {}
    for key, warm in (("cold", False), ("warm-start", True), ("warm", True)):
        t, c = time.monotonic(), time.process_time()
        r = check_file(os.path.join(tree, "reference_model", "reversal.py"), quick=True,
                       limits=Limits(warm=warm, cores=2))
        assert r["verdict"] == "clean", r["verdict"]
        out[key] = [round(time.monotonic() - t, 2), round(time.process_time() - c, 3)]
    return out


def main(argv: list[str]) -> None:
    rounds = 3
    if argv[:1] == ["--rounds"]:
        rounds, argv = int(argv[1]), argv[2:]
    seen: dict[str, list[dict]] = {t: [] for t in argv}
    for _ in range(rounds):
        for tree in argv:
            p = subprocess.run([sys.executable, __file__, "--one", tree], capture_output=True, text=True, cwd=tree,
                               env=dict(os.environ, PYTHONPATH=tree))
            seen[tree].append(json.loads(p.stdout.strip().splitlines()[-1]))
            print(tree, seen[tree][-1], flush=True)
    for tree, rows in seen.items():
        med = {k: [statistics.median(r[k][i] for r in rows) for i in (0, 1)] for k in rows[0]}
        print("median", tree, json.dumps(med))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        print(json.dumps(one(sys.argv[2])))
    else:
        main(sys.argv[1:])
