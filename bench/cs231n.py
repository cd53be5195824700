"""Score the CS231n pack on real student code (issue 46, "Done when").

    python bench/cs231n.py [--trees DIR] [--labels JSON] [--only TEXT] [--kind KIND] [--timeout S] [--via roles|check]

The labels (../shared/realworld/cs231n-calibration.json) name versions of public CS231n assignment-3 forks:
`correct`, `bug` (per buggy component: its class, the lines read by hand, `course_invisible`,
`course_check_only`) and `incomplete`. The trees are NOT part of this project: extract each labelled version's
files (its `paths`, less its `root`) into DIR/<owner>__<name>__<commit[:8]>/ (env MTXDIAG_CS231N_TREES, default
/work/cs231n-trees). Without that folder the bench says so and exits 0.

Each version is checked in a child process of its own (student code never runs in the bench's process):
`--via check` (the default) through `mtxdiag check FOLDER` (the pack's loader, as users run it), `--via roles` a child that imports the two files and runs the generic role probes of every binding its edition
makes the student's; the bench then diagnoses with the engine, in its own process, from the checks' JSON.

Scores (course-check-only bugs left out): correct versions with a problem diagnosis (target 0); the buggy class
named (target >= 90%); among the first k problem diagnoses, k = the version's bugs (>= 80%); the diagnosis on a
labelled or student-fixed line +-1 (>= 70%); course-invisible bugs flagged (all), and marked by the report as
ones the course's own checks would not have seen (Diagnosis.course_invisible), with the visible ones it wrongly
marks so. `--kind bug` scores only the buggy versions. Writes
bench/results/cs231n.json.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LABELS = ROOT.parent / "shared" / "realworld" / "cs231n-calibration.json"
THRESHOLD = 0.5
FILES = {"transformer_layers.py": "cs231n/transformer_layers.py",
         "transformer.py": "cs231n/classifiers/transformer.py"}


def tree_dir(trees: Path, repo: str, commit: str) -> Path:
    owner, name = repo.split("/", 1)
    return trees / f"{owner}__{name}__{commit[:8]}"


# -- the child: load one tree, run the role probes, print the checks -------------------------------------------
def edition_of(tree: Path, pack):
    for e in pack.editions:
        if all(m in (tree / p).read_text(errors="replace") for p, m in e.markers.items() if (tree / p).is_file()) \
                and all((tree / p).is_file() for p in e.markers):
            return e
    return next(e for e in pack.editions if e.name == "2022")     # the editions most forks are of


def child(tree: Path) -> None:
    import importlib

    from harness.child.probes.roles import ROLE_PROBES, RoleContext
    from harness.packs.cs231n import reference
    from harness.packs.cs231n.pack import PACK
    import types
    sys.path.insert(0, str(tree))
    for pkg in ("cs231n", "cs231n.classifiers"):      # the submission is the two files: the packages' own
        d = tree / pkg.replace(".", "/")               # __init__.py (data loaders, Cython) are not run
        if d.is_dir():
            sys.modules[pkg] = types.ModuleType(pkg)
            sys.modules[pkg].__path__ = [str(d)]
    source = {rel: (tree / rel).read_text(errors="replace") for rel in FILES.values() if (tree / rel).is_file()}
    edition = edition_of(tree, PACK)
    checks: list[dict] = []
    for b in PACK.bindings:
        if b.role not in ROLE_PROBES or b.component not in edition.student or \
                (b.editions and edition.name not in b.editions):
            continue
        module_name, qual = b.target.split(":")
        try:
            obj = importlib.import_module(module_name)
            for part in qual.split("."):
                obj = getattr(obj, part)
        except Exception as e:  # the student's module does not load: one error check for the binding
            where, tb = None, e.__traceback__
            while tb is not None:
                name = tb.tb_frame.f_code.co_filename
                rel = next((r for r in source if name.endswith(r)), None)
                if rel:
                    where = {"file": rel, "line": tb.tb_lineno}
                tb = tb.tb_next
            if isinstance(e, SyntaxError) and e.filename:
                rel = next((r for r in source if e.filename.endswith(r)), None)
                where = {"file": rel, "line": e.lineno} if rel else where
            if isinstance(e, ModuleNotFoundError) and not (e.name or "").startswith("cs231n"):
                checks.append({"id": f"{b.component}.load", "status": "skip", "measured": None, "expected": "",
                               "detail": f"environment: {e}", "data": {"component": b.component}, "location": None})
                continue
            checks.append({"id": f"{b.component}.load", "status": "error", "measured": None, "expected": "",
                           "detail": f"{type(e).__name__}: {e}", "data": {"component": b.component},
                           "location": where})
            continue
        ref = reference
        for part in qual.split("."):
            ref = getattr(ref, part)
        rctx = RoleContext(b, obj, ref, 0, "cpu", True, source)
        for probe in ROLE_PROBES[b.role]:
            try:
                checks += probe.fn(rctx)
            except Exception as e:  # a harness fault: reported, never a diagnosis
                checks.append({"id": f"{b.component}.{probe.id}", "status": "error", "measured": None,
                               "expected": "", "detail": f"harness: {type(e).__name__}: {e}",
                               "data": {"harness_error": True, "component": b.component}, "location": None})
    print(json.dumps({"edition": edition.name, "checks": checks}, default=str))


# -- the parent: diagnose and score -----------------------------------------------------------------------------
def classes_at(tree: Path) -> dict:
    """{(file, line): class name} for the trees' two files."""
    out = {}
    for rel in FILES.values():
        p = tree / rel
        if not p.is_file():
            continue
        try:
            mod = ast.parse(p.read_text(errors="replace"))
        except SyntaxError:
            continue
        for node in mod.body:
            if isinstance(node, ast.ClassDef):
                for ln in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                    out[(rel, ln)] = node.name
    return out


def component_of(d: dict, where: dict) -> str | None:
    """The course class a diagnosis is on ("CaptioningTransformer.sample" is CaptioningTransformer's)."""
    if d.get("component"):
        return str(d["component"]).split(".")[0]
    loc = d.get("location") or {}
    f = str(loc.get("file") or "")
    rel = next((r for r in FILES.values() if f == r or f.endswith("/" + r)), f)
    return where.get((rel, loc.get("line")))


def run_check(folder: Path, timeout: float) -> dict:
    """`--via check`: the user's own path, `mtxdiag check FOLDER` (the pack's loader, the sandbox, the daemon);
    the result's checks and the diagnoses its parent-side engine made."""
    import tempfile
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        try:
            subprocess.run([sys.executable, "-m", "harness", "check", str(folder), "--json", str(out),
                            "--html", str(Path(tmp) / "r.html"), "--timeout", str(timeout)],
                           capture_output=True, text=True, timeout=timeout + 30, cwd=tmp,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
            r = json.loads(out.read_text())
            contract = next((c for c in r.get("checks") or [] if c.get("id") == "contract"), {})
            payload = {"edition": (contract.get("data") or {}).get("edition"), "checks": r.get("checks") or [],
                       "diagnoses": r.get("diagnoses") or [],
                       "error": (r.get("error") or {}).get("message") if r.get("verdict") == "error" else None}
        except subprocess.TimeoutExpired:
            payload = {"error": "timeout"}
        except (OSError, json.JSONDecodeError) as e:
            payload = {"error": f"no result: {e}"}
    payload["seconds"] = round(time.time() - t0, 1)
    return payload


def run_version(tree: Path, timeout: float) -> dict:
    t0 = time.time()
    try:
        r = subprocess.run([sys.executable, __file__, "--child", str(tree)], capture_output=True, text=True,
                           timeout=timeout, cwd=str(ROOT), env={**os.environ, "PYTHONPATH": str(ROOT)})
        payload = json.loads(r.stdout.strip().splitlines()[-1]) if r.stdout.strip() else \
            {"error": r.stderr[-800:]}
    except subprocess.TimeoutExpired:
        payload = {"error": "timeout"}
    except json.JSONDecodeError:
        payload = {"error": "no JSON"}
    payload["seconds"] = round(time.time() - t0, 1)
    return payload


def score(labels: list, trees: Path, timeout: float, only: str | None, via: str = "roles",
          kinds: tuple[str, ...] = ()) -> dict:
    from harness import engine
    from harness.packs.cs231n.pack import PACK
    rows = []
    for v in labels:
        if only and only not in v["repo"] or kinds and v["kind"] not in kinds:
            continue
        tree = tree_dir(trees, v["repo"], v["commit"])
        if not tree.is_dir():
            continue
        if via == "check":
            got = run_check(tree / v.get("root", ""), timeout)
            diags = got.get("diagnoses", [])
        else:
            got = run_version(tree, timeout)
            diags = engine.diagnose({"assignment": PACK.name, "checks": got.get("checks", []),
                                     "submission": str(tree)}) if "checks" in got else []
        where = classes_at(tree)
        problems = [d for d in diags if d.get("severity", "problem") != "info" and d["confidence"] >= THRESHOLD]
        row = {"repo": v["repo"], "commit": v["commit"][:8], "edition": got.get("edition"), "kind": v["kind"],
               "seconds": got["seconds"], "error": got.get("error"),
               "diagnoses": [(d["id"], d["confidence"], component_of(d, where), (d.get("location") or {}).get("line"))
                             for d in problems],
               "failed": sorted(c["id"] for c in got.get("checks", []) if c["status"] in ("fail", "error")),
               # the pieces whose replay of the course's calls says the course's checks would fail
               "course_seen": sorted(c["id"] for c in got.get("checks", []) if c["id"].endswith(".course") and
                                     ((c.get("data") or {}).get("course_calls") or {}).get("visible"))}
        bugs = [b for b in v.get("bugs", []) if not b.get("course_check_only")]
        row["bugs"] = []
        for b in bugs:
            comps = [component_of(d, where) for d in problems]
            lines = set(b.get("lines") or []) | set(b.get("fix_changed_lines_bug_side") or [])
            named = b["component"] in comps
            in_k = b["component"] in comps[:len(bugs)]
            on_line = any(component_of(d, where) == b["component"] and (d.get("location") or {}).get("line") and
                          any(abs(d["location"]["line"] - n) <= 1 for n in lines) for d in problems)
            # the report's course line (Diagnosis.course_invisible) on a diagnosis of the bug's class
            marks = [d.get("course_invisible") for d in problems if component_of(d, where) == b["component"]]
            row["bugs"].append({"component": b["component"], "bug": b["bug"][:90],
                                "invisible": bool(b.get("course_invisible", v.get("course_invisible"))),
                                "marked": True in marks, "marked_seen": False in marks,
                                "named": named, "in_k": in_k,
                                "line": on_line, "lines": sorted(lines)})
        rows.append(row)
        print(f"{v['kind']:10} {row['edition'] or '-':5} {v['repo'][:34]:34} {row['seconds']:5}s "
              f"{[d[0] for d in row['diagnoses']]} {[(b['named'], b['line']) for b in row['bugs']]}", flush=True)
    bugs = [b for r in rows for b in r["bugs"]]
    correct = [r for r in rows if r["kind"] == "correct"]
    pct = (lambda xs: round(100 * sum(xs) / len(xs), 1) if xs else None)
    return {"versions": len(rows),
            "correct": len(correct), "correct_with_problem": sum(bool(r["diagnoses"]) for r in correct),
            "correct_course_seen": sum(bool(r["course_seen"]) for r in correct),
            "bugs": len(bugs), "named_pct": pct([b["named"] for b in bugs]),
            "in_k_pct": pct([b["in_k"] for b in bugs]), "line_pct": pct([b["line"] for b in bugs]),
            "invisible": sum(b["invisible"] for b in bugs),
            "invisible_flagged": sum(b["invisible"] and b["named"] for b in bugs),
            # the course replay (Binding.course) against the labels: course-invisible bugs the report says the
            # course would not have seen, and course-visible ones it wrongly says so of
            "invisible_marked": sum(b["invisible"] and b["marked"] for b in bugs),
            "visible_named": sum(not b["invisible"] and b["named"] for b in bugs),
            "visible_marked_invisible": sum(not b["invisible"] and b["marked"] for b in bugs),
            "errors": sum(bool(r["error"]) for r in rows), "rows": rows}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trees", default=os.environ.get("MTXDIAG_CS231N_TREES", "/work/cs231n-trees"))
    ap.add_argument("--labels", default=str(LABELS))
    ap.add_argument("--only")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--child")
    ap.add_argument("--via", choices=("roles", "check"), default="check")
    ap.add_argument("--kind", action="append", default=[], help="only versions of this kind (correct, bug, ...)")
    a = ap.parse_args()
    if a.child:
        child(Path(a.child))
        return 0
    trees = Path(a.trees)
    if not trees.is_dir() or not Path(a.labels).is_file():
        print(f"cs231n bench: no trees at {trees} (or no labels at {a.labels}); skipped")
        return 0
    result = score(json.loads(Path(a.labels).read_text()), trees, a.timeout, a.only, a.via, tuple(a.kind))
    out = ROOT / "bench" / "results" / "cs231n.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
