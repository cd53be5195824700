"""Score the engine on the hand-written corpus (issue 11): false alarms, bugs flagged, misattributions, lines.

    python bench/corpus.py [--full] [--split calibration|holdout|all] [--seeds N] [--assignment A]
                           [--only TEXT] [--jobs N] [--timeout S]

Every entry of tests/corpus/<assignment>/manifest.json is checked through harness.api.check_file (the library
API, one submission per child process), --quick unless --full, for seeds 0..N-1. Per split it reports:
  (a) false alarms: correct files with any diagnosis at confidence >= 0.5;
  (b) bugs flagged: bug files whose verdict is `problems`;
  (c) misattributions: bug files given a cause at confidence >= 0.8 that is not in the entry's
      acceptable_causes. Every behavioural cause the engine has (harness.causes.RULES) counts, not only the
      README's original list: a new cause that names the wrong thing is as wrong as an old one. When the engine
      gains a cause that rightly names a corpus bug, add its id to that entry's acceptable_causes;
  (d) line accuracy: single-line bugs whose top diagnosis points within +-1 of the bug line (notebooks: the
      same cell, cell_line within +-1), over those with a location; how many had none is reported too.
Writes bench/results/corpus.json. tests/quality/test_corpus_bars.py asserts issue 11's done-when on the same numbers.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.api import check_file, write_json_atomic  # noqa: E402
from harness.assignments import SINGLE_FILE  # noqa: E402
from harness.runner import Limits  # noqa: E402

CORPUS = ROOT / "tests" / "corpus"
ASSIGNMENTS = SINGLE_FILE     # the corpus folders: one per single-file assignment (harness/assignments.py)
SPLITS = ("calibration", "holdout")
FALSE_ALARM_CONF = 0.5      # issue 11: no diagnosis at >= 0.5 on correct code
MISATTRIBUTION_CONF = 0.8   # issue 11: no wrong cause at >= 0.8 on a bug
LINE_TOLERANCE = 1          # issue 11: reported line within +-1 of the bug


def load_manifest(assignment: str) -> list[dict]:
    """The manifest's entries, each with `assignment` and the absolute `path` added."""
    doc = json.loads((CORPUS / assignment / "manifest.json").read_text())
    out = []
    for e in doc["entries"]:
        e = dict(e, assignment=assignment, path=str(CORPUS / assignment / e["file"]))
        out.append(e)
    return out


def load_other_manifest(path: Path) -> list[dict]:
    """Entries of another manifest of the same scheme (e.g. tests/corpus/reversal/unseen/manifest.json)."""
    doc = json.loads(Path(path).read_text())
    return [dict(e, assignment=doc["assignment"], path=str(Path(path).parent / e["file"])) for e in doc["entries"]]


def entries(assignments=ASSIGNMENTS, split: str = "all", only: str | None = None) -> list[dict]:
    found = [e for a in assignments for e in load_manifest(a)]
    if split != "all":
        found = [e for e in found if e["split"] == split]
    if only:
        found = [e for e in found if only in e["file"]]
    return found


def behavioural_causes() -> set[str]:
    """Cause ids that name a bug in the code (not 'the file could not be loaded or run')."""
    from harness.causes import RULES
    return {r.CAUSE.id for r in RULES}


def run(selected: list[dict], *, quick: bool = True, seeds: int = 1, jobs: int = 1, timeout: float = 600,
        log=None, warm: bool = False) -> list[dict]:
    """check_file on every (entry, seed); returns one record per run with the result's essentials.
    warm: each check a fork of a warm worker, as `grade` runs them (the same results, without a new
    interpreter and torch import per check; tests/integration/test_warm.py compares the two)."""
    jobs_list = [(e, s) for e in selected for s in range(seeds)]

    def one(job):
        e, seed = job
        t = time.perf_counter()
        r = check_file(e["path"], assignment=e["assignment"], seed=seed, quick=quick,
                       limits=Limits(timeout_s=timeout, threads=1, warm=warm))
        rec = {"file": e["file"], "assignment": e["assignment"], "seed": seed, "verdict": r["verdict"],
               "diagnoses": [{k: d.get(k) for k in ("id", "confidence", "location", "title", "severity")}
                             for d in r["diagnoses"]],
               "error": r.get("error"), "seconds": round(time.perf_counter() - t, 1)}
        if log:
            log(f"{e['assignment']}/{e['file']} seed {seed}: {r['verdict']} "
                f"{[(d['id'], d['confidence']) for d in r['diagnoses']]} ({rec['seconds']}s)")
        return rec
    try:
        with ThreadPoolExecutor(max(1, jobs)) as pool:
            return list(pool.map(one, jobs_list))
    finally:
        if warm:
            from harness.isolation import warm as warm_pool
            warm_pool.close_all()


def _line_hit(entry: dict, loc: dict | None) -> bool | None:
    """None when the top diagnosis has no location; else whether it is within tolerance of the bug line."""
    if not loc:
        return None
    if entry.get("cells"):
        want = entry["cells"][0]
        return loc.get("cell") == want["cell"] and abs((loc.get("cell_line") or -99) - want["cell_line"]) <= LINE_TOLERANCE
    return abs(int(loc.get("line") or -99) - entry["lines"][0]) <= LINE_TOLERANCE


def _single_line(entry: dict) -> bool:
    return len(entry.get("cells") or entry.get("lines") or []) == 1


def score(selected: list[dict], records: list[dict], causes: set[str] | None = None) -> dict:
    """The four numbers of issue 11, per split and overall, with the failures behind each."""
    causes = behavioural_causes() if causes is None else causes
    by_key = {(e["assignment"], e["file"]): e for e in selected}
    groups = {"all": records}
    for sp in SPLITS:
        groups[sp] = [r for r in records if by_key[(r["assignment"], r["file"])]["split"] == sp]
    groups = {k: v for k, v in groups.items() if v or k == "all"}
    out = {}
    for name, recs in groups.items():
        s = {"correct_runs": 0, "false_alarms": [], "bug_runs": 0, "flagged": 0, "not_flagged": [],
             "misattributions": [], "single_line_runs": 0, "line_hits": 0, "line_misses": [], "no_location": []}
        for r in recs:
            e = by_key[(r["assignment"], r["file"])]
            where = f"{r['assignment']}/{r['file']} (seed {r['seed']})"
            said = [(d["id"], d["confidence"]) for d in r["diagnoses"]]
            if e["kind"] == "correct":
                s["correct_runs"] += 1
                # an info finding (script-fails: the file is fine as a module) accuses nothing; the verdict stays
                # clean, so it is no false alarm
                alarms = [d for d in r["diagnoses"] if (d["confidence"] or 0) >= FALSE_ALARM_CONF
                          and d.get("severity", "problem") != "info"]
                # a manifest's `disputed_causes`: the engine's catalogue and the file's author disagree (the
                # entry says why, with numbers); such a diagnosis is listed on its own, not as a false alarm
                disputed = [d for d in alarms if d["id"] in (e.get("disputed_causes") or [])]
                if disputed:
                    s.setdefault("disputed", []).append({"run": where, "said": said})
                alarms = [d for d in alarms if d not in disputed]
                if alarms or r["verdict"] == "error":
                    s["false_alarms"].append({"run": where, "verdict": r["verdict"], "said": said,
                                              "error": (r.get("error") or {}).get("reason")})
                continue
            s["bug_runs"] += 1
            if r["verdict"] == "problems":
                s["flagged"] += 1
            else:
                s["not_flagged"].append({"run": where, "verdict": r["verdict"], "said": said})
            ok = set(e.get("acceptable_causes") or [])
            wrong = [(d["id"], d["confidence"]) for d in r["diagnoses"]
                     if (d["confidence"] or 0) >= MISATTRIBUTION_CONF and d["id"] in causes and d["id"] not in ok]
            if wrong:
                s["misattributions"].append({"run": where, "wrong": wrong, "acceptable": sorted(ok),
                                             "property": e.get("property")})
            if _single_line(e) and r["diagnoses"]:
                s["single_line_runs"] += 1
                top = r["diagnoses"][0]
                hit = _line_hit(e, top.get("location"))
                want = (e.get("cells") or e.get("lines"))[0]
                if hit is None:
                    s["no_location"].append({"run": where, "top": top["id"], "bug_line": want})
                elif hit:
                    s["line_hits"] += 1
                else:
                    s["line_misses"].append({"run": where, "top": top["id"], "bug_line": want,
                                             "reported": top["location"]})
        with_loc = s["single_line_runs"] - len(s["no_location"])
        s["line_accuracy"] = round(s["line_hits"] / with_loc, 3) if with_loc else None
        out[name] = s
    return out


def per_cause(selected: list[dict], records: list[dict]) -> dict:
    """Line accuracy (+-1) of the top diagnosis per cause, over the single-line bugs: a catalogue bug counts under
    its catalogue_cause, another under "off-catalogue: <first acceptable cause>". Each cause: runs, hits, misses
    (a location off the line), none (no location), and the accuracy over the located runs (issue 48 item 1)."""
    by_key = {(e["assignment"], e["file"]): e for e in selected}
    out: dict = {}
    for r in records:
        e = by_key[(r["assignment"], r["file"])]
        if e["kind"] != "bug" or not _single_line(e) or not r["diagnoses"]:
            continue
        cause = e.get("catalogue_cause") or "off-catalogue: " + ((e.get("acceptable_causes") or ["-"])[0])
        row = out.setdefault(cause, {"runs": 0, "hits": 0, "misses": 0, "none": 0, "catalogue": bool(e.get("catalogue_cause"))})
        row["runs"] += 1
        hit = _line_hit(e, r["diagnoses"][0].get("location"))
        row["hits" if hit else "none" if hit is None else "misses"] += 1
    for row in out.values():
        located = row["hits"] + row["misses"]
        row["accuracy"] = round(row["hits"] / located, 3) if located else None
    return dict(sorted(out.items(), key=lambda kv: (not kv[1]["catalogue"], kv[0])))


def per_cause_table(rows: dict) -> str:
    lines = [f"{'cause (line +-1 of the top diagnosis)':<52} {'hits / located':>15} {'no loc':>7}"]
    totals = {True: [0, 0, 0], False: [0, 0, 0]}
    for cause, row in rows.items():
        located = row["hits"] + row["misses"]
        acc = "-" if row["accuracy"] is None else f"{row['accuracy']:.0%}"
        lines.append(f"{cause:<52} {row['hits']:>5} / {located:<3} {acc:>4} {row['none']:>7}")
        t = totals[row["catalogue"]]
        t[0], t[1], t[2] = t[0] + row["hits"], t[1] + located, t[2] + row["none"]
    for cat, name in ((True, "catalogue bugs"), (False, "off-catalogue bugs")):
        h, n, none = totals[cat]
        if n or none:
            lines.append(f"{'all ' + name:<52} {h:>5} / {n:<3} {(f'{h / n:.0%}' if n else '-'):>4} {none:>7}")
    return "\n".join(lines)


def done_when_failures(s: dict) -> list[str]:
    """Issue 11's done-when, on one split's score; [] when met."""
    fails = []
    if s["false_alarms"]:
        fails.append(f"{len(s['false_alarms'])} false alarm(s) >= {FALSE_ALARM_CONF} on correct code")
    if s["flagged"] < s["bug_runs"]:
        fails.append(f"{s['bug_runs'] - s['flagged']} bug run(s) not flagged")
    if s["misattributions"]:
        fails.append(f"{len(s['misattributions'])} misattribution(s) >= {MISATTRIBUTION_CONF}")
    if s["line_accuracy"] is None or s["line_accuracy"] < 0.85:
        fails.append(f"line within +-{LINE_TOLERANCE}: {s['line_accuracy']} < 0.85")
    return fails


def table(scores: dict) -> str:
    rows = [f"{'split':<12} {'false alarms':>14} {'bugs flagged':>14} {'misattrib.':>12} {'line +-1':>16} {'no loc':>7}"]
    for name in [n for n in ("calibration", "holdout", "all") if n in scores]:
        s = scores[name]
        with_loc = s["single_line_runs"] - len(s["no_location"])
        acc = "-" if s["line_accuracy"] is None else f"{s['line_hits']}/{with_loc} {s['line_accuracy']:.0%}"
        rows.append(f"{name:<12} {len(s['false_alarms']):>6} / {s['correct_runs']:<5} "
                    f"{s['flagged']:>6} / {s['bug_runs']:<5} {len(s['misattributions']):>4} / {s['bug_runs']:<5} "
                    f"{acc:>16} {len(s['no_location']):>7}")
    return "\n".join(rows)


def failures_text(s: dict) -> str:
    lines = []
    for f in s["false_alarms"]:
        lines.append(f"FALSE ALARM  {f['run']}: {f['verdict']} {f['said']}" + (f" ({f['error']})" if f["error"] else ""))
    for f in s.get("disputed", []):
        lines.append(f"DISPUTED     {f['run']}: {f['said']} (see the entry's disputed_note)")
    for f in s["not_flagged"]:
        lines.append(f"NOT FLAGGED  {f['run']}: {f['verdict']} {f['said']}")
    for f in s["misattributions"]:
        lines.append(f"MISATTRIB.   {f['run']}: {f['wrong']} (acceptable {f['acceptable']}; breaks: {f['property']})")
    for f in s["line_misses"]:
        lines.append(f"LINE         {f['run']}: {f['top']} at {f['reported']}, bug at {f['bug_line']}")
    for f in s["no_location"]:
        lines.append(f"NO LOCATION  {f['run']}: {f['top']}, bug at {f['bug_line']}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", dest="full", action="store_false", help="skip the training probes (default)")
    mode.add_argument("--full", dest="full", action="store_true", help="run the training probes too")
    ap.add_argument("--split", choices=("calibration", "holdout", "all"), default="all")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--assignment", choices=ASSIGNMENTS + ("all",), default="all")
    ap.add_argument("--only", help="only files whose name contains this text")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--warm", action="store_true", help="run each check in a fork of a warm worker (as grade)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "corpus.json"))
    ap.add_argument("--rescore", help="score the runs of an earlier output (its JSON) instead of running checks")
    ap.add_argument("--manifest", help="score another manifest instead (e.g. the blind set in "
                                       "tests/corpus/reversal/unseen/manifest.json); its splits count in 'all'")
    a = ap.parse_args(argv)
    assignments = ASSIGNMENTS if a.assignment == "all" else (a.assignment,)
    selected = entries(assignments, a.split, a.only) if not a.manifest else \
        [e for e in load_other_manifest(Path(a.manifest)) if not a.only or a.only in e["file"]]
    t = time.perf_counter()
    if a.rescore:
        records = json.loads(Path(a.rescore).read_text())["runs"]
        known = {(e["assignment"], e["file"]) for e in selected}
        records = [r for r in records if (r["assignment"], r["file"]) in known]
        selected = [e for e in selected if any((e["assignment"], e["file"]) == (r["assignment"], r["file"])
                                               for r in records)]
    else:
        records = run(selected, quick=not a.full, seeds=a.seeds, jobs=a.jobs, timeout=a.timeout,
                      log=lambda m: print(m, file=sys.stderr, flush=True), warm=a.warm)
    scores = score(selected, records)
    causes = per_cause(selected, records)
    print(table(scores))
    print(per_cause_table(causes))
    print(failures_text(scores["all"]))
    if a.rescore:
        return 0 if not done_when_failures(scores["all"]) else 1
    write_json_atomic({"quick": not a.full, "seeds": a.seeds, "split": a.split, "assignments": list(assignments),
                       "seconds": round(time.perf_counter() - t, 1), "scores": scores, "per_cause": causes,
                       "runs": records}, a.out)
    print(f"wrote {a.out}")
    return 0 if not done_when_failures(scores["all"]) else 1


if __name__ == "__main__":
    sys.exit(main())
