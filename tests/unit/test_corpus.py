"""The hand-written corpus of issue 11 (tests/corpus/): a valid manifest (fast), and the engine's numbers on it
(slow): no false alarm on correct code, every bug flagged, no wrong cause at >= 0.8, lines within +-1.

The slow tests score through bench/corpus.py's own functions, so the test and the benchmark can never
disagree about what a false alarm or a misattribution is.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from harness.causes import BY_ID

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus"

_spec = importlib.util.spec_from_file_location("bench_corpus", ROOT / "bench" / "corpus.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

FIELDS = {"file", "kind", "split", "style"}
BUG_FIELDS = {"property", "lines", "catalogue_cause", "acceptable_causes", "description"}


def _entries():
    return [e for a in bench.ASSIGNMENTS for e in bench.load_manifest(a)]


# ---- fast: the manifest ------------------------------------------------------------------------------------

@pytest.mark.parametrize("assignment", bench.ASSIGNMENTS)
def test_manifest_lists_exactly_the_files_on_disk(assignment):
    listed = [e["file"] for e in bench.load_manifest(assignment)]
    assert len(listed) == len(set(listed)), "a file is listed twice"
    on_disk = sorted(str(p.relative_to(CORPUS / assignment)) for p in (CORPUS / assignment).rglob("*")
                     if p.suffix in (".py", ".ipynb") and p.relative_to(CORPUS / assignment).parts[0] != "unseen")
    assert sorted(listed) == on_disk


@pytest.mark.parametrize("entry", _entries(), ids=lambda e: f"{e['assignment']}/{e['file']}")
def test_manifest_entry_is_complete(entry):
    missing = FIELDS - entry.keys()
    assert not missing, missing
    assert entry["kind"] in ("correct", "bug")
    assert entry["split"] in bench.SPLITS
    assert entry["style"].strip()
    assert entry["file"].startswith(entry["kind"] + ("s/" if entry["kind"] == "bug" else "/"))
    if entry["kind"] == "correct":
        return
    missing = BUG_FIELDS - entry.keys()
    assert not missing, missing
    assert entry["property"].strip() and entry["description"].strip()
    assert entry["catalogue_cause"] is None or entry["catalogue_cause"] in BY_ID
    if entry["catalogue_cause"]:
        assert entry["catalogue_cause"] in entry["acceptable_causes"]
    assert all(c in BY_ID for c in entry["acceptable_causes"]), entry["acceptable_causes"]


@pytest.mark.parametrize("entry", [e for e in _entries() if e["kind"] == "bug"],
                         ids=lambda e: f"{e['assignment']}/{e['file']}")
def test_bug_lines_point_at_code(entry):
    path = Path(entry["path"])
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text())["cells"]
        assert entry["cells"], "a notebook bug names its cells"
        for c in entry["cells"]:
            src = "".join(cells[c["cell"] - 1]["source"]).splitlines()
            assert 1 <= c["cell_line"] <= len(src) and src[c["cell_line"] - 1].strip()
        return
    text = path.read_text().splitlines()
    assert entry["lines"], "a bug names at least one line"
    for n in entry["lines"]:
        assert 1 <= n <= len(text), n
        line = text[n - 1].strip()
        assert line and not line.startswith("#"), f"line {n} is blank or a comment: {line!r}"


@pytest.mark.parametrize("assignment", bench.ASSIGNMENTS)
def test_every_split_holds_both_kinds(assignment):
    got = {(e["kind"], e["split"]) for e in bench.load_manifest(assignment)}
    assert got == {(k, s) for k in ("correct", "bug") for s in bench.SPLITS}


def test_reversal_corpus_has_the_size_issue_11_asks_for():
    rev = bench.load_manifest("reversal")
    assert sum(e["kind"] == "correct" for e in rev) >= 30
    assert sum(e["kind"] == "bug" and e["catalogue_cause"] is None for e in rev) >= 20
    for kind in ("correct", "bug"):
        n = [e for e in rev if e["kind"] == kind]
        held = sum(e["split"] == "holdout" for e in n)
        assert 0.2 <= held / len(n) <= 0.45, f"{kind}: {held}/{len(n)} held out"


def test_scoring_counts_what_the_issue_counts():
    """score() on synthetic records: each of the four numbers moves for the reason it should."""
    es = [dict(file="correct/a.py", assignment="reversal", kind="correct", split="calibration"),
          dict(file="bugs/b.py", assignment="reversal", kind="bug", split="holdout", lines=[10],
               acceptable_causes=["stale-mask"]),
          dict(file="bugs/c.py", assignment="reversal", kind="bug", split="holdout", lines=[5, 6],
               acceptable_causes=[])]

    def rec(f, verdict, diags):
        return {"file": f, "assignment": "reversal", "seed": 0, "verdict": verdict, "diagnoses": diags}
    d = lambda i, c, line=None: {"id": i, "confidence": c, "location": {"file": "x", "line": line} if line else None}
    records = [rec("correct/a.py", "problems", [d("no-warmup", 0.4), d("stale-mask", 0.55)]),
               rec("bugs/b.py", "problems", [d("stale-mask", 0.9, 11), d("causal-mask-missing", 0.85)]),
               rec("bugs/c.py", "clean", [])]
    s = bench.score(es, records, causes={"stale-mask", "causal-mask-missing", "no-warmup"})["all"]
    assert [f["said"] for f in s["false_alarms"]] == [[("no-warmup", 0.4), ("stale-mask", 0.55)]]
    assert (s["flagged"], s["bug_runs"]) == (1, 2)
    assert [m["wrong"] for m in s["misattributions"]] == [[("causal-mask-missing", 0.85)]]
    assert (s["line_hits"], s["single_line_runs"], s["line_accuracy"]) == (1, 1, 1.0)
    assert len(bench.done_when_failures(s)) == 3
    # an info finding (the file fails as a script) on correct code accuses nothing: no false alarm
    info = {"id": "script-fails", "confidence": 0.9, "location": None, "severity": "info"}
    s = bench.score(es[:1], [rec("correct/a.py", "clean", [info])], causes=set())["all"]
    assert s["false_alarms"] == []
    s = bench.score(es[:1], [rec("correct/a.py", "problems", [dict(info, severity="problem")])], causes=set())["all"]
    assert len(s["false_alarms"]) == 1


# ---- slow: the engine on the corpus -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def corpus_scores():
    selected = bench.entries()
    # two at a time in warm workers, as `grade` runs checks: the engine's numbers are the same as cold
    # (tests/integration/test_warm.py), for about half the time on two cores
    return bench.score(selected, bench.run(selected, quick=True, seeds=1, jobs=2, warm=True))


