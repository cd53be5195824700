"""issue 45 for a one-file pack on trial (`block`, `reversal`: --assignment): the same check in one process (MTXDIAG_PACK_SPLIT=0, as before) and split
(MTXDIAG_PACK_SPLIT=trial: the file in the model server, the probes in the prober), compared and timed.

For each file (default: tests/fixtures/correct/NAME_*.py, submissions/NAME_lesson*.py and the reference, NAME the
assignment; --blind adds tests/corpus/NAME/), both runs, cold, the order alternating: the checks' (id, status, line) and the diagnoses' (cause,
line) must be the same. Prints each difference and, last, one JSON line: files compared, files differing, the
paired medians of the wall times and their ratio. --mutants adds every mutant of the assignment (its file exported).

    python bench/block_split.py [--assignment block] [--quick] [--mutants] [--blind] [--rounds 1] [FILE ...]
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

from harness import api, assignments  # noqa: E402
from harness.isolation.split import SWITCH  # noqa: E402



def corpus(name: str) -> list[Path]:
    """The assignment's correct fixtures, lesson files and reference (.py files: a notebook runs in one process)."""
    return sorted((ROOT / "tests/fixtures/correct").glob(f"{name}_*.py")) + \
        sorted((ROOT / "submissions").glob(f"{name}_lesson*.py")) + \
        [ROOT / "reference_model" / assignments.assignment_of(name).reference]


def blind(name: str) -> list[Path]:
    return sorted((ROOT / "tests/corpus" / name).glob("*/*.py"))        # --blind: its corpus of tests/corpus


def key(r: dict) -> dict:
    """What the two paths must agree on: each check's status and line, each diagnosis' cause and line."""
    line = lambda loc: (loc or {}).get("line") if isinstance(loc, dict) else None     # noqa: E731
    return {"load": (r.get("load") or {}).get("ok"),
            "checks": [(c["id"], c["status"], line(c.get("location"))) for c in r.get("checks") or ()],
            "diagnoses": [(d.get("cause"), line(d.get("location"))) for d in r.get("diagnoses") or ()]}


def one(path: Path, split: bool, quick: bool, name: str) -> tuple[float, dict]:
    os.environ[SWITCH] = "trial" if split else "0"
    t = time.perf_counter()
    r = api.check_file(path, assignment=name, quick=quick)
    return time.perf_counter() - t, r


def mutant_files(folder: Path, name: str) -> list[Path]:
    import importlib
    where, _, attr = assignments.pack_of(name).mutants.partition(":")
    out = []
    for m in getattr(importlib.import_module(where), attr):
        p = folder / f"{m.id}.py"
        p.write_text(m.source())
        out.append(p)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--assignment", default=assignments.BLOCK.name, choices=[assignments.BLOCK.name,
                                                                              assignments.REVERSAL.name])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--mutants", action="store_true")
    ap.add_argument("--blind", action="store_true")
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    name = a.assignment
    tmp = Path(tempfile.mkdtemp(prefix=f"{name}-split-"))
    files = list(a.files or corpus(name)) + (blind(name) if a.blind else []) + \
        (mutant_files(tmp, name) if a.mutants else [])
    times: dict = {False: [], True: []}
    differ = []
    for i, f in enumerate(files):
        got = {}
        for r in range(a.rounds):
            for split in ((False, True) if (i + r) % 2 == 0 else (True, False)):
                took, res = one(f, split, a.quick, name)
                times[split].append(took)
                got[split] = key(res)
        same = got[False] == got[True]
        print(f"{f.name}: {'same' if same else 'DIFFERENT'}  one {times[False][-1]:.2f} s  split {times[True][-1]:.2f} s",
              flush=True)
        if not same:
            differ.append(f.name)
            for part in ("load", "checks", "diagnoses"):
                if got[False][part] != got[True][part]:
                    print(f"  {part}: one process {got[False][part]}\n  {' ' * len(part)}  split       {got[True][part]}")
    m1, m2 = statistics.median(times[False]), statistics.median(times[True])
    print(json.dumps({"files": len(files), "differing": differ, "quick": a.quick, "one_process_median_s": round(m1, 2),
                      "split_median_s": round(m2, 2), "ratio": round(m2 / m1, 2),
                      **({"one_s": [round(t, 2) for t in times[False]], "split_s": [round(t, 2) for t in times[True]]}
                         if len(files) == 1 else {})}))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
