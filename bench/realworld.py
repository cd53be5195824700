"""Score `check --quick --assignment lm` on real student repositories (issue 25, item 8).

    python bench/realworld.py [--trees DIR] [--labels JSON] [--part calibration|holdout|all] [--only TEXT]
                              [--full] [--timeout S]

The labels (../shared/realworld/cs336-calibration.json) name public CS336 assignment-1 repositories at a
commit: `correct` (the course's model tests pass; `acceptable` lists the diagnoses that are nevertheless
true), `bug` (with the component, and `fix_commit`: the student's own later fix) and `incomplete`. The
trees are NOT part of this project: extract each labelled commit (and each fix commit) yourself into
DIR/<owner>__<name>__<commit[:8]>/ (env MTXDIAG_REALWORLD_TREES). Without that folder the bench says so
and exits 0, so nothing here ever depends on student code being present.

Scores, per part:
- passing versions: a false alarm is a diagnosis at confidence >= 0.5, severity other than `info`, that
  `acceptable` does not list ([component or "*", cause id]);
- bug versions: the bug's component diagnosed at >= 0.5 (any diagnosis), the top diagnosis on it, the
  component among the version's first k problem diagnoses (k: the labelled bugs at that commit), and the
  top diagnosis's line within +-1 of a line the fix changed (the fix tree diffed against the bug tree; an
  insertion counts the lines either side of it);
- incomplete versions: no harness error (reported, not a target).
Parts: a repository is in the hold-out third when sha256(repo) % 3 == 0 (fixed before any tuning), so a
repository's versions never sit on both sides. Writes bench/results/realworld.json.

`--quick` checks by default (no training probes); `--full` runs the full check (the brief training through the
student's interfaces too), as `mtxdiag check` does without --quick.
"""
from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# the labels' component names -> the engine's components that stand for them
COMPONENT = {"attention": {"mha", "mha-rope"}, "data": {"get-batch"}, "mha_rope": {"mha-rope"}}
THRESHOLD = 0.5


def part_of(repo: str) -> str:
    return "holdout" if int(hashlib.sha256(repo.encode()).hexdigest(), 16) % 3 == 0 else "calibration"


def tree_dir(trees: Path, repo: str, commit: str) -> Path:
    owner, name = repo.split("/", 1)
    return trees / f"{owner}__{name}__{commit[:8]}"


def changed_lines(bug_tree: Path, fix_tree: Path) -> dict[str, set[int]]:
    """{relative path: 1-based lines of the bug version that the fix replaced, deleted or inserted beside}."""
    out: dict[str, set[int]] = {}
    for p in sorted(bug_tree.rglob("*.py")):
        rel = p.relative_to(bug_tree).as_posix()
        q = fix_tree / rel
        if not q.is_file():
            continue
        a = p.read_text(errors="replace").splitlines()
        b = q.read_text(errors="replace").splitlines()
        lines: set[int] = set()
        for tag, i1, i2, _j1, _j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if tag in ("replace", "delete"):
                lines.update(range(i1 + 1, i2 + 1))
            elif tag == "insert":
                lines.update({i1, i1 + 1})
        if lines:
            out[rel] = lines
    return out


def wanted(component: str) -> set[str]:
    return COMPONENT.get(component, {component.replace("_", "-")})


def acceptable(d: dict, allowed) -> bool:
    return any(d.get("id") == cid and comp in ("*", d.get("component")) for comp, cid in allowed or ())


def on_changed_line(d: dict, tree: Path, changed: dict[str, set[int]]) -> bool:
    loc = d.get("location") or {}
    f, line = loc.get("file"), loc.get("line")
    if not f or not line:
        return False
    try:
        rel = Path(f).resolve().relative_to(tree.resolve()).as_posix()
    except ValueError:
        return False
    return any(abs(line - c) <= 1 for c in changed.get(rel, ()))


def score(e: dict, r: dict, tree: Path, trees: Path, k: int = 1) -> dict:
    diags = r.get("diagnoses") or []
    shown = [{"id": d.get("id"), "component": d.get("component"), "confidence": d.get("confidence"),
              "severity": d.get("severity"), "where": _where(d, tree)} for d in diags]
    row = {"repo": e["repo"], "commit": e["commit"][:8], "kind": e["kind"], "part": part_of(e["repo"]),
           "verdict": r.get("verdict"), "error": bool(r.get("error")), "diagnoses": shown}
    if e["kind"] == "correct":
        row["false_alarms"] = [s for d, s in zip(diags, shown) if (d.get("confidence") or 0) >= THRESHOLD
                               and d.get("severity") != "info" and not acceptable(d, e.get("acceptable"))]
    elif e["kind"] == "bug":
        want = wanted(e["component"])
        real = [d for d in diags if d.get("severity") != "info"]
        row["component"] = e["component"]
        row["named"] = any(d.get("component") in want and (d.get("confidence") or 0) >= THRESHOLD for d in real)
        row["top"] = bool(real) and real[0].get("component") in want
        row["first_k"] = any(d.get("component") in want for d in real[:k])
        if e.get("fix_commit"):
            fix = tree_dir(trees, e["repo"], e["fix_commit"])
            row["line"] = bool(real) and fix.is_dir() and on_changed_line(real[0], tree, changed_lines(tree, fix))
    return row


def _where(d: dict, tree: Path) -> str | None:
    loc = d.get("location") or {}
    if not loc.get("file"):
        return None
    try:
        f = Path(loc["file"]).resolve().relative_to(tree.resolve()).as_posix()
    except ValueError:
        f = loc["file"]
    return f"{f}:{loc.get('line')}"


def summary(rows: list[dict]) -> dict:
    correct = [r for r in rows if r["kind"] == "correct"]
    bugs = [r for r in rows if r["kind"] == "bug"]
    lined = [r for r in bugs if "line" in r]
    inc = [r for r in rows if r["kind"] == "incomplete"]
    return {"correct": len(correct), "correct_with_false_alarm": sum(bool(r["false_alarms"]) for r in correct),
            "bugs": len(bugs), "component_named": sum(r["named"] for r in bugs),
            "component_top": sum(r["top"] for r in bugs), "component_first_k": sum(r["first_k"] for r in bugs),
            "bugs_with_fix": len(lined), "top_on_fix_line": sum(r["line"] for r in lined),
            "incomplete": len(inc), "harness_errors": sum(r["error"] for r in rows)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trees", default=os.environ.get("MTXDIAG_REALWORLD_TREES"))
    ap.add_argument("--labels", default=os.environ.get("MTXDIAG_REALWORLD_LABELS",
                                                       str(ROOT.parent / "shared/realworld/cs336-calibration.json")))
    ap.add_argument("--part", default="all", choices=("all", "calibration", "holdout"))
    ap.add_argument("--only", default=None)
    ap.add_argument("--full", action="store_true", help="full checks (training probes too), not --quick")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per check")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "realworld.json"))
    a = ap.parse_args()
    labels = Path(a.labels)
    if not a.trees or not Path(a.trees).is_dir() or not labels.is_file():
        print(f"realworld: skipped (trees folder {a.trees!r} or labels {str(labels)!r} absent; "
              "see this file's docstring)", file=sys.stderr)
        return 0
    from harness.api import check_file
    from harness.assignments import LM
    from harness.runner import Limits
    trees = Path(a.trees)
    entries = json.loads(labels.read_text())["entries"]
    entries = [e for e in entries if (a.part == "all" or part_of(e["repo"]) == a.part)
               and (not a.only or a.only in f"{e['repo']}@{e['commit']}")]
    per_commit: dict[tuple[str, str], int] = {}
    for e in entries:
        if e["kind"] == "bug":
            per_commit[(e["repo"], e["commit"])] = per_commit.get((e["repo"], e["commit"]), 0) + 1
    rows = []
    for e in entries:
        tree = tree_dir(trees, e["repo"], e["commit"])
        if not tree.is_dir():
            print(f"  {e['repo']}@{e['commit'][:8]}: tree absent, skipped", file=sys.stderr)
            continue
        t = time.monotonic()
        r = check_file(tree, assignment=LM.name, quick=not a.full, limits=Limits(timeout_s=a.timeout))
        row = score(e, r, tree, trees, per_commit.get((e["repo"], e["commit"]), 1))
        row["seconds"] = round(time.monotonic() - t, 1)
        rows.append(row)
        top = row["diagnoses"][0] if row["diagnoses"] else {}
        mark = {"correct": lambda: "FALSE ALARM " + ",".join(f"{x['component']}:{x['id']}" for x in row["false_alarms"])
                if row["false_alarms"] else "ok",
                "bug": lambda: f"want {e['component']}: named={row['named']} top={row['top']} "
                       f"first_k={row['first_k']} line={row.get('line')}",
                "incomplete": lambda: "error" if row["error"] else "ran"}[e["kind"]]()
        print(f"{row['part'][:5]} {e['kind'][:4]} {e['repo'][:40]:40} {e['commit'][:8]} "
              f"top={top.get('component')}:{top.get('id')}@{top.get('where')} {mark}", file=sys.stderr)
    result = {part: summary([r for r in rows if r["part"] == part]) for part in ("calibration", "holdout")}
    result["all"] = summary(rows)
    result["mode"] = "full" if a.full else "quick"
    for part in ("calibration", "holdout", "all"):
        print(part, result["mode"], json.dumps(result[part]))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"summary": result, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
