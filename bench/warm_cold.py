"""Issue 26: a warm worker gives the same result as a cold child, on the corpus (the mutants: test_warm.py).

    python bench/warm_cold.py [--set main,blind,lm] [--only TEXT] [--full]

Every entry of the chosen manifests (main: tests/corpus/{reversal,block}; blind: tests/corpus/reversal/unseen;
lm: tests/corpus/lm, files and repositories) is checked twice through harness.api.check_file, seed 0: cold
(a new sandboxed interpreter) and warm (a fork of one warm worker that has already run every earlier entry,
so whatever one student's run could leave behind is there for the next). The two results are compared whole
but for timings and the clock times a student's program prints (tests/compare_results.py `comparable`: every check's status, measurements and data, every
diagnosis with its confidence and location). Prints each difference and writes bench/results/warm_cold.json.
Exit status 1 when any result differs.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from compare_results import comparable  # noqa: E402
from harness.assignments import LM, REVERSAL, SINGLE_FILE  # noqa: E402
from harness.api import check_file, write_json_atomic  # noqa: E402
from harness.runner import Limits  # noqa: E402

CORPUS = ROOT / "tests" / "corpus"


def entries(sets: list[str]) -> list[dict]:
    out = []
    if "main" in sets:
        for a in SINGLE_FILE:
            doc = json.loads((CORPUS / a / "manifest.json").read_text())
            out += [{"set": "main", "assignment": a, "path": CORPUS / a / e["file"]} for e in doc["entries"]]
    if "blind" in sets:
        doc = json.loads((CORPUS / REVERSAL.name / "unseen" / "manifest.json").read_text())
        out += [{"set": "blind", "assignment": doc["assignment"], "path": CORPUS / REVERSAL.name / "unseen" / e["file"]}
                for e in doc["entries"]]
    if "lm" in sets:
        doc = json.loads((CORPUS / LM.name / "manifest.json").read_text())
        out += [{"set": "lm", "assignment": LM.name, "path": CORPUS / LM.name / e["path"]} for e in doc]
    return out


# A student's program may print the time of day (a logging format): two runs printing different clock times
# are the same run. Only the printed output is normalised so; everything the grader measured is compared as is.
_CLOCK = re.compile(r"\b\d\d:\d\d:\d\d(?:[.,]\d+)?\b")


def _same_clock(result: dict) -> dict:
    for key in ("stdout", "stderr"):
        if isinstance(result.get(key), str):
            result[key] = _CLOCK.sub("<time>", result[key])
    return result


def _differences(a, b, where="") -> list[str]:
    """Paths at which two comparable results differ (the first few)."""
    if type(a) is not type(b):
        return [f"{where}: {a!r:.80} != {b!r:.80}"]
    if isinstance(a, dict):
        return [d for k in sorted(set(a) | set(b), key=str)
                for d in _differences(a.get(k), b.get(k), f"{where}.{k}")][:5]
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _differences(x, y, f"{where}[{i}]")][:5]
    return [] if a == b else [f"{where}: {a!r:.80} != {b!r:.80}"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", default="main,blind,lm", help="comma-separated: main, blind, lm")
    ap.add_argument("--only", help="only entries whose path contains this text")
    ap.add_argument("--full", action="store_true", help="full checks (training probes) instead of --quick")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "warm_cold.json")
    a = ap.parse_args(argv)
    chosen = [e for e in entries(a.set.split(",")) if not a.only or a.only in str(e["path"])]
    from harness.isolation import warm
    rows, t0 = [], time.perf_counter()
    try:
        for e in chosen:
            kw = dict(assignment=e["assignment"], seed=0, quick=not a.full)
            cold = check_file(e["path"], limits=Limits(timeout_s=a.timeout), **kw)
            hot = check_file(e["path"], limits=Limits(timeout_s=a.timeout, warm=True), **kw)
            diff = _differences(_same_clock(comparable(cold)), _same_clock(comparable(hot)))
            name = str(e["path"].relative_to(CORPUS))
            rows.append({"set": e["set"], "entry": name, "verdict": cold["verdict"], "same": not diff,
                         "differences": diff})
            print(f"{'same   ' if not diff else 'DIFFER '} {name} ({cold['verdict']})"
                  + "".join(f"\n    {d}" for d in diff), flush=True)
    finally:
        warm.close_all()
    same = sum(r["same"] for r in rows)
    print(f"\n{same}/{len(rows)} identical warm and cold ({time.perf_counter() - t0:.0f} s)")
    write_json_atomic({"sets": a.set, "quick": not a.full, "identical": same, "entries": len(rows), "rows": rows},
                      a.out)
    return 0 if same == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
