"""Issue 30's numbers: how many diagnoses a verified repair proves, and what repairs cost.

    python bench/repairs.py [--set mutants,corpus,correct] [--only TEXT] [--limit N] [--timing N] [--timing-cli N]

Each file gets a quick check (harness.api.check_file, a warm worker of this process, seed 0), then
harness.repair.run.repair_check on its result (the same path: candidates re-checked in the sandbox).
  mutants:  located catalogue diagnoses (the mutant's own cause, with a line) that get a verified repair;
  corpus:   tests/corpus/{reversal,block} bugs (or --manifest's): catalogue bugs whose acceptable cause gets a verified repair,
            and single-line bugs outside the catalogue that get a verified repair found by search (also: on
            the bug's own line, +-1; and verified by any repair, the usual fix of a cause the engine named
            included);
  correct:  verified repairs on correct files (must be 0), and every repair's "other checks unchanged" is
            enforced by verify.changed (rejections are counted).
--timing N: N files (spread over the set) re-checked as a plain quick check and as a quick check plus repairs
of one diagnosis, alternating, on the same warm worker: the time ratio (issue 30: <= 1.5) of the means, and
the median of the files' ratios; --no-coverage: the re-checks run the whole quick suite (the comparison).
--timing-cli N: the same ratio for the commands a student types (`mtxdiag check --quick` with and without
`--repair`: through the daemon, reports written, and the repairs of every diagnosis the command tries).
Every timed run checks a text nothing has seen: the file with a comment line of its own (a student checks
an edited file each time; the same text again would find its parse cached in the daemon).
Writes bench/results/repairs.json.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.api import check_file, write_json_atomic  # noqa: E402
from harness.assignments import SINGLE_FILE  # noqa: E402
from harness.repair.run import repair_check  # noqa: E402
from harness.runner import Limits  # noqa: E402

CORPUS = ROOT / "tests" / "corpus"
LIM = Limits(cores=2, warm=True)


def mutant_files(tmp: Path) -> list[dict]:
    from mutants.registry import MUTANTS
    out = []
    for m in MUTANTS:
        if m.assignment not in SINGLE_FILE:
            continue
        f = tmp / f"{m.id}.py"
        f.write_text(m.source())
        out.append({"set": "mutants", "file": str(f), "name": m.id, "assignment": m.assignment, "cause": m.cause,
                    "acceptable": [m.cause], "lines": None})
    return out


def corpus_files(manifests=None) -> list[dict]:
    """The bugs and correct files of the corpus manifests (default: tests/corpus/{reversal,block}), or of the
    given manifest files (the blind set: tests/corpus/reversal/unseen/manifest.json)."""
    out = []
    for m in manifests or [CORPUS / a / "manifest.json" for a in SINGLE_FILE]:
        m = Path(m)
        doc = json.loads(m.read_text())
        a = doc.get("assignment") or m.parent.name
        for e in doc["entries"]:
            if not e["file"].endswith(".py"):
                continue
            out.append({"set": "corpus" if e["kind"] == "bug" else "correct", "file": str(m.parent / e["file"]),
                        "name": e["file"], "assignment": a, "cause": e.get("catalogue_cause"),
                        "acceptable": e.get("acceptable_causes") or [], "lines": e.get("lines")})
    return out


def first_limits(coverage: bool) -> Limits:
    """The check a repair follows: as `check --repair` runs it (recording which functions each probe ran), or
    without that record (--no-coverage: every re-check runs the whole quick suite, as before)."""
    return replace(LIM, coverage=coverage)


def one(e: dict, coverage: bool = True) -> dict:
    t = time.monotonic()
    r = check_file(e["file"], assignment=e["assignment"], quick=True, limits=first_limits(coverage))
    check_s = time.monotonic() - t
    t = time.monotonic()
    repair_check(r, e["file"], limits=LIM)
    row = {k: e[k] for k in ("set", "name", "cause", "lines")}
    row.update(check_s=round(check_s, 2), repair_s=round(time.monotonic() - t, 2), diagnoses=[
        {"id": d["id"], "confidence": d["confidence"], "line": (d.get("location") or {}).get("line"),
         "repair": {k: v for k, v in (d.get("repair") or {}).items() if k != "diff"} if d.get("repair") else None,
         "diff": (d.get("repair") or {}).get("diff")} for d in r["diagnoses"]])
    acceptable = set(e["acceptable"]) | ({e["cause"]} if e["cause"] else set())
    located = [d for d in row["diagnoses"] if d["id"] in acceptable and d["line"]]
    row["located_catalogue"] = bool(located) and e["cause"] is not None
    row["verified_catalogue"] = any((d["repair"] or {}).get("verified") for d in located)
    search = [d for d in row["diagnoses"] if (d["repair"] or {}).get("verified") and d["repair"]["found_by"] == "search"]
    row["verified_search"] = bool(search)
    lines = e["lines"] or []
    row["search_on_line"] = any(abs(d["repair"]["line"] - ln) <= 1 for d in search for ln in lines)
    row["verified_any"] = sum(1 for d in row["diagnoses"] if (d["repair"] or {}).get("verified"))
    return row


_RUNS = iter(range(1, 1 << 30))


def fresh(path, folder: Path) -> Path:
    """The file's text with a comment line of its own added, under the file's name in a new folder: every
    timed check meets a text no cache of the daemon or of this process has seen (a student's every check is
    of an edited file), the repairs' parse included."""
    d = Path(tempfile.mkdtemp(prefix="mtxdiag-bench-run-", dir=folder))
    f = d / Path(path).name
    f.write_text(Path(path).read_text(encoding="utf-8") + f"\n# timed run {next(_RUNS)}\n", encoding="utf-8")
    return f


def timing(files: list[dict], n: int, coverage: bool = True) -> dict:
    """Plain quick check vs quick check + repairs of one diagnosis, alternating on the same warm pool: the
    ratio of the means, and the median of the per-file ratios."""
    per = []
    chosen = files[::max(1, len(files) // n)][:n]       # spread over the set, not its first n
    work = Path(tempfile.mkdtemp(prefix="mtxdiag-bench-timing-"))
    if chosen:      # the warm worker started before the clock runs: the first file's plain check would pay it
        check_file(chosen[0]["file"], assignment=chosen[0]["assignment"], quick=True, limits=LIM)
    for e in chosen:
        plain, with_repair = [], []
        for mode in ("plain", "repair", "plain", "repair"):
            f = fresh(e["file"], work)
            t = time.monotonic()
            r = check_file(f, assignment=e["assignment"], quick=True,
                           limits=first_limits(coverage) if mode == "repair" else LIM)
            if mode == "repair":
                repair_check(r, f, limits=LIM, max_diagnoses=1)
            (plain if mode == "plain" else with_repair).append(time.monotonic() - t)
        per.append((e["name"], statistics.mean(plain), statistics.mean(with_repair)))
    p, q = statistics.mean(x[1] for x in per), statistics.mean(x[2] for x in per)
    return {"files": [x[0] for x in per], "plain_s": round(p, 2), "with_repair_s": round(q, 2),
            "ratio": round(q / p, 2), "median_ratio": round(statistics.median(x[2] / x[1] for x in per), 2),
            "per_file": {x[0]: round(x[2] / x[1], 2) for x in per}, "coverage": coverage}


def timing_cli(files: list[dict], n: int) -> dict:
    """The same ratio as a student sees it: `mtxdiag check FILE --quick` against `... --quick --repair`, each a
    new command through the check daemon (the repairs' re-checks too), JSON and HTML reports written, the two
    alternating; includes what both pay alike (the command's start, the reports)."""
    per = []
    chosen = files[::max(1, len(files) // n)][:n]
    out_dir = Path(tempfile.mkdtemp(prefix="mtxdiag-bench-cli-"))

    def run(e, extra):
        f = fresh(e["file"], out_dir)
        cmd = [sys.executable, "-m", "harness", "check", str(f), "--quick", "--assignment", e["assignment"],
               "--json", str(out_dir / "r.json"), "--html", str(out_dir / "r.html")] + extra
        t = time.monotonic()
        subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        return time.monotonic() - t
    for extra in ([], ["--repair"]) if chosen else ():    # the daemon and its workers started before the clock
        run(chosen[0], extra)
    for e in chosen:
        plain, with_repair = [], []
        for mode in ("plain", "repair", "plain", "repair"):
            (plain if mode == "plain" else with_repair).append(run(e, ["--repair"] if mode == "repair" else []))
        per.append((e["name"], statistics.mean(plain), statistics.mean(with_repair)))
    p, q = statistics.mean(x[1] for x in per), statistics.mean(x[2] for x in per)
    return {"files": [x[0] for x in per], "plain_s": round(p, 2), "with_repair_s": round(q, 2),
            "ratio": round(q / p, 2), "median_ratio": round(statistics.median(x[2] / x[1] for x in per), 2),
            "per_file": {x[0]: round(x[2] / x[1], 2) for x in per}, "through": "the command line and its daemon"}


def rate(rows, key, among) -> str:
    pool = [r for r in rows if among(r)]
    k = sum(1 for r in pool if r[key])
    return f"{k}/{len(pool)}" + (f" = {100 * k / len(pool):.0f}%" if pool else "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", default="mutants,corpus,correct")
    ap.add_argument("--only", default=None)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--timing", type=int, default=0)
    ap.add_argument("--timing-cli", type=int, default=0, help="N files: the ratio of the two commands as a student "
                    "runs them (mtxdiag check --quick [--repair], through the daemon, reports written)")
    ap.add_argument("--timing-only", action="store_true", help="only the time ratio (on --only's files)")
    ap.add_argument("--no-coverage", action="store_true", help="checks without the record of which functions each "
                    "probe ran: every re-check runs the whole quick suite (the comparison)")
    ap.add_argument("--manifest", action="append", default=None,
                    help="corpus manifest(s) to read instead of tests/corpus/{reversal,block} (e.g. the blind set)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "repairs.json"))
    ap.add_argument("--summarize", nargs="*", default=None, help="only summarize these result files together")
    a = ap.parse_args()
    if a.summarize:
        rows = [r for f in a.summarize for r in json.loads(Path(f).read_text())["rows"]]
        print(json.dumps(summarize(rows), indent=1))
        return
    tmp = Path(tempfile.mkdtemp(prefix="mtxdiag-bench-repairs-"))
    files = [e for e in mutant_files(tmp) + corpus_files(a.manifest) if e["set"] in a.set.split(",")
             and (not a.only or any(o in e["name"] for o in a.only.split(",")))][:a.limit]
    files = [e for e in files if e["set"] != "corpus" or e["cause"] or len(e["lines"] or []) == 1]   # in a metric
    files.sort(key=lambda e: e["cause"] is None)    # catalogue bugs first: the slow machine may stop a run early
    rows = []
    for e in ([] if a.timing_only else files):
        row = one(e, coverage=not a.no_coverage)
        rows.append(row)
        write_json_atomic({"rows": rows, "partial": True}, a.out)
        top = row["diagnoses"][0] if row["diagnoses"] else {}
        print(f"{row['set']:8} {row['name'][:40]:40} check {row['check_s']:5.1f}s repair {row['repair_s']:5.1f}s "
              f"{top.get('id', '-')}:{top.get('line')} {json.dumps((top.get('repair') or {}).get('verified'))} "
              f"{(top.get('repair') or {}).get('label', '')}", flush=True)
    out = {"rows": rows, "summary": summarize(rows)}
    if a.timing:
        out["timing"] = timing([e for e in files if e["set"] != "correct"], a.timing, coverage=not a.no_coverage)
    if a.timing_cli:
        out["timing_cli"] = timing_cli([e for e in files if e["set"] != "correct"], a.timing_cli)
    print(json.dumps(out["summary"], indent=1))
    for k in ("timing", "timing_cli"):
        if k in out:
            print(json.dumps(out[k]))
    write_json_atomic(out, a.out)


def summarize(rows) -> dict:
    return {
        "mutants_verified_of_located": rate(rows, "verified_catalogue", lambda r: r["set"] == "mutants" and r["located_catalogue"]),
        "corpus_catalogue_verified_of_located": rate(rows, "verified_catalogue",
                                                     lambda r: r["set"] == "corpus" and r["located_catalogue"]),
        "corpus_catalogue_verified_of_all": rate(rows, "verified_catalogue",
                                                 lambda r: r["set"] == "corpus" and r["cause"] is not None),
        "offcatalogue_single_line_search_verified": rate(
            rows, "verified_search", lambda r: r["set"] == "corpus" and r["cause"] is None and len(r["lines"] or []) == 1),
        "offcatalogue_single_line_verified_any": rate(
            rows, "verified_any", lambda r: r["set"] == "corpus" and r["cause"] is None and len(r["lines"] or []) == 1),
        "offcatalogue_single_line_search_on_bug_line": rate(
            rows, "search_on_line", lambda r: r["set"] == "corpus" and r["cause"] is None and len(r["lines"] or []) == 1),
        "correct_files_with_verified_repairs": sum(1 for r in rows if r["set"] == "correct" and r["verified_any"]),
        "correct_files": sum(1 for r in rows if r["set"] == "correct"),
        "verified_with_a_pass_to_skip": sum(1 for r in rows for d in r["diagnoses"]
                                            if (d["repair"] or {}).get("unmeasured")),
    }


if __name__ == "__main__":
    main()
