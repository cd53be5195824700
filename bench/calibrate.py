"""Calibrate the probes' thresholds: the measured range on correct code over several seeds, and on mutants.

    python bench/calibrate.py [--seeds 5] [--jobs 2] [--full] [--corpus] [--mutants]

For every numeric check it prints the range over correct implementations (the reference, the lesson's
code, the correct-but-different fixtures and, with --corpus, the calibration split of the correct corpus in
tests/corpus/reversal/: its holdout split is never used here) and over the mutants of the cause the check is
meant to catch, so the margin between a threshold and correct code is visible. Writes
bench/results/calibration.json.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.selftest import correct_cases, mutant_cases  # noqa: E402
from harness.api import check_file  # noqa: E402
from harness.assignments import REVERSAL  # noqa: E402
from harness.runner import Limits  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402

# check id -> how to read one number out of it
NUMBERS = {
    "first-loss": lambda c: c["measured"],
    "attn-saturation": lambda c: c["measured"],
    "attn-rows-sum": lambda c: c["measured"],
    "heads-permutation": lambda c: c["measured"],
    "causal-leak": lambda c: c["measured"],
    "padding-invariance": lambda c: c["measured"],
    "embedding-scale": lambda c: c["measured"],
    "overfit": lambda c: (c.get("data") or {}).get("steps") if c["status"] == "pass" else None,   # steps to < 0.05
    "source-sensitivity": lambda c: c["measured"],
    "stateless-forward": lambda c: c["measured"] if isinstance(c["measured"], (int, float)) else None,
    "pe-formula": lambda c: c["measured"],
    "train-pad-ignored": lambda c: c["measured"],
    "decode-accuracy": lambda c: c["measured"],
    "cross-attn-pattern": lambda c: (c["measured"] or {}).get("anti_diagonal"),
    "brief-training": lambda c: c["measured"],
    "batch-independence": lambda c: c["measured"],
    "eval-determinism": lambda c: c["measured"],
    "train-zero-grad": lambda c: c["measured"],
    "train-mode": lambda c: c["measured"],
    "decode-consistency": lambda c: c["measured"],
}


def corpus_cases():
    """The correct files of the corpus's calibration split, as selftest cases (expected None = clean)."""
    from harness.selftest import Case
    folder = ROOT / "tests" / "corpus" / REVERSAL.name
    m = json.loads((folder / "manifest.json").read_text())
    return [Case(f"corpus/{e['file']}", folder / e["file"], None, REVERSAL.name)
            for e in m["entries"] if e["kind"] == "correct" and e["split"] == "calibration"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--full", action="store_true", help="include the training probes")
    ap.add_argument("--mutants", action="store_true", help="also measure every mutant (seed 0)")
    ap.add_argument("--corpus", action="store_true", help="also the correct corpus's calibration split")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cases = correct_cases() + (corpus_cases() if a.corpus else [])
        jobs = [(c, s) for c in cases for s in range(a.seeds)]
        if a.mutants:
            jobs += [(c, 0) for c in mutant_cases(Path(tmp))]

        def one(job):
            case, seed = job
            r = check_file(case.path, assignment=case.assignment, seed=seed, quick=not a.full,
                           limits=Limits(timeout_s=600, threads=1))
            print(f"{case.name} seed {seed}: {r['verdict']} {[d['id'] for d in r['diagnoses']]}", file=sys.stderr)
            return case, seed, r
        with ThreadPoolExecutor(a.jobs) as pool:
            results = list(pool.map(one, jobs))
    ranges = defaultdict(lambda: defaultdict(list))
    verdicts = []
    for case, seed, r in results:
        group = "correct" if case.expected is None else case.expected
        verdicts.append({"case": case.name, "seed": seed, "verdict": r["verdict"],
                         "diagnoses": [d["id"] for d in r["diagnoses"]]})
        for c in r["checks"]:
            f = NUMBERS.get(c["id"])
            v = f(c) if f and c["status"] != "error" else None
            if isinstance(v, (int, float)):
                ranges[c["id"]][group].append(v)
    out = {cid: {g: {"min": min(v), "max": max(v), "n": len(v)} for g, v in groups.items()}
           for cid, groups in ranges.items()}
    for cid, groups in sorted(out.items()):
        print(cid)
        for g, s in sorted(groups.items()):
            print(f"   {g:30} {s['min']:.4g} .. {s['max']:.4g}  (n={s['n']})")
    false_alarms = [v for v in verdicts if v["case"].startswith(("reference", "submissions", "correct", "corpus"))
                    and v["verdict"] != "clean"]
    print(f"correct code flagged: {len(false_alarms)} of "
          f"{sum(1 for v in verdicts if v['case'].startswith(('reference', 'submissions', 'correct', 'corpus')))}")
    for v in false_alarms:
        print("   ", v)
    (ROOT / "bench" / "results").mkdir(parents=True, exist_ok=True)
    (ROOT / "bench" / "results" / "calibration.json").write_text(
        json.dumps({"ranges": out, "verdicts": verdicts}, indent=1))


if __name__ == "__main__":
    main()
