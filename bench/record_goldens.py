"""Record the goldens of tests/unit/test_goldens.py: each self-test case's and corpus file's child payload and
the result the parent built from it.

    python bench/record_goldens.py                # every case (reference, lesson, mutants, lm, packs, corpus)
    python bench/record_goldens.py --only causal  # cases whose name contains the text

The unit test replays a payload through engine.build_result in-process and compares the diagnoses, verdict
and checks with the recorded ones; a rule change that moves a diagnosis shows there in seconds instead of
in the self-test's minutes. The payload is what the child measured, so only child-side changes (a probe's
numbers, a new check) call for re-recording. Bulky fields no rule reads are dropped (stdout, artifacts'
pictures), so a golden stays small.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.engine import build_result  # noqa: E402
from harness.runner import Limits, run_child  # noqa: E402
from harness.selftest import Case, correct_cases, lm_cases, mutant_cases, pack_cases  # noqa: E402

OUT = ROOT / "tests" / "unit" / "goldens"
COMMAND = "python bench/record_goldens.py"
# what the comparison covers: everything a rule or the verdict decides
COMPARED = ("assignment", "verdict", "diagnoses", "checks", "skipped_code", "error")


def _corpus_entries() -> list[dict]:
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_corpus", ROOT / "bench" / "corpus.py")
    corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)
    return corpus.entries()


def corpus_cases() -> list[Case]:
    """The corpus's files (tests/corpus): its bugs carry no single expected cause (the manifest lists the
    acceptable ones), so a golden of one records the result only; `corpus_kinds` says which are correct."""
    return [Case(f"corpus/{e['assignment']}/{e['file']}", Path(e["path"]), None, e["assignment"])
            for e in _corpus_entries()]


def corpus_kinds() -> dict[str, str]:
    """Corpus case name -> the manifest's kind ("correct" or "bug")."""
    return {f"corpus/{e['assignment']}/{e['file']}": e["kind"] for e in _corpus_entries()}


def slim_payload(payload: dict) -> dict:
    """The payload without what no rule reads (printed output, the pictures' arrays), its keys sorted as the
    golden file stores them (a dict's order shows in evidence strings, so the result is made from this)."""
    p = dict(payload, stdout="", artifacts={})
    return json.loads(json.dumps(p, sort_keys=True))


def replay(golden: dict) -> dict:
    """The parent's result from a recorded payload (what the unit test compares)."""
    from harness.outcome import ChildOutcome
    outcome = ChildOutcome(golden["payload"], golden["status"], golden.get("reason", ""))
    r = build_result(outcome, golden["submission"], golden["requested_assignment"], quick=golden["quick"])
    return {k: r.get(k) for k in COMPARED}


def file_name(case_name: str) -> str:
    return case_name.replace("/", "__").replace(" ", "_").replace("(", "").replace(")", "") + ".json"


def record(case: Case, quick: bool) -> dict:
    outcome = run_child(case.path, assignment=case.assignment, seed=0, quick=quick,
                        limits=Limits(timeout_s=600, warm=True, threads=1))
    golden = {"case": case.name, "expected_cause": case.expected, "requested_assignment": case.assignment,
              "quick": quick, "submission": f"<{case.name}>", "status": outcome.status, "reason": outcome.reason,
              "payload": slim_payload(outcome.payload) if outcome.payload is not None else None}
    golden["result"] = replay(golden)
    return golden


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=None, help="only cases whose name contains this text")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--no-corpus", action="store_true", help="self-test cases only")
    ap.add_argument("--missing", action="store_true", help="only cases without a golden yet")
    ap.add_argument("--reverse", action="store_true", help="last case first (a second recorder meets the first)")
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mtxdiag-goldens-") as tmp:
        cases = mutant_cases(Path(tmp)) + lm_cases(Path(tmp)) + pack_cases(Path(tmp)) + correct_cases()  # causes first
        if not args.no_corpus:
            cases += corpus_cases()
        if args.only:
            cases = [c for c in cases if args.only in c.name]
        if args.missing:
            cases = [c for c in cases if not (OUT / file_name(c.name)).exists()]
        if args.reverse:
            cases.reverse()

        def one(case):
            if args.missing and (OUT / file_name(case.name)).exists():
                return           # recorded meanwhile (by a second recorder)
            record_one(case)

        def record_one(case):
            t = time.monotonic()
            g = record(case, quick=False)
            (OUT / file_name(case.name)).write_text(json.dumps(g, indent=1, sort_keys=True) + "\n")
            top = (g["result"]["diagnoses"] or [{}])[0].get("id")
            print(f"{case.name}: {g['status']} {top or 'clean'} ({time.monotonic() - t:.1f} s)", flush=True)
        try:
            with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
                list(pool.map(one, cases))
        finally:
            from harness.isolation import warm
            warm.close_all()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MTXDIAG_DAEMON", "0")
    sys.exit(main())
