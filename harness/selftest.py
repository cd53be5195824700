"""`mtxdiag selftest`: every mutant, the reference and the lesson's code, through the same path as `check`.

A rule is kept only if it names its mutant's cause first and stays silent on
correct code; this command is the proof, and its exit status says so.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import click

from .api import check_file
from .assignments import ALL, AUTO, BLOCK, LM, NAMES, assignment_of, folder_pack_of
from .runner import Limits

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Case:
    name: str
    path: Path
    expected: str | None          # cause id, or None for correct code
    assignment: str = AUTO
    bug_lines: tuple = ()         # lines of the mutated file that the mutant's edits changed
    component: str | None = None  # lm: the component the mutant's edit is in (the top diagnosis must name it)
    # lm: the file the edit is in; packs: the files holding an edited class (the reported file must end with one)
    bug_file: str | tuple[str, ...] | None = None


def changed_lines(before: str, after: str) -> tuple:
    """1-based line numbers of `after` that differ from `before`."""
    import difflib
    out = []
    sm = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines())
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag in ("replace", "insert"):
            out.extend(range(j1 + 1, j2 + 1))
        elif tag == "delete":
            out.extend([j1, j1 + 1])      # a deleted line is located at its neighbours
    return tuple(out)


def correct_cases() -> list[Case]:
    """The reference, the lesson's code as students paste it, and correct-but-different implementations."""
    out = [Case(f"reference/{a.name}", ROOT / "reference_model" / a.reference, None, a.name)
           for a in ALL if not a.is_repository and a.reference]   # a folder pack's reference is its own module
    for folder in (ROOT / "submissions", ROOT / "tests" / "fixtures" / "correct"):
        for p in sorted(folder.glob("*.py")) + sorted(folder.glob("*.ipynb")):
            if p.name.startswith(("make_", "_")):
                continue
            out.append(Case(f"{folder.name}/{p.name}", p, None))
    return out


def mutant_cases(tmp: Path, assignment: str | None = None) -> list[Case]:
    from mutants import MUTANTS, reference_source, source
    out = []
    for m in MUTANTS:
        if assignment and m.assignment != assignment:
            continue
        p = tmp / f"{m.id}.py"
        text = source(m)
        p.write_text(text)
        out.append(Case(m.id, p, m.cause, m.assignment, changed_lines(reference_source(m.reference), text)))
    return out


def pack_cases(tmp: Path, name: str | None = None) -> list[Case]:
    """A pack's (every pack's, without `name`) reference as a correct assignment folder and each mutant it declares
    (Pack.mutants) as the folder of its mutated reference (mutants/packs.py), checked as that pack's assignment."""
    from mutants import packs, reference_source
    out = []
    for pack_name in ([name] if name else list(packs.names())):
        mutants = packs.of_pack(pack_name)
        for reference in dict.fromkeys(m.reference for m in mutants):
            root = packs.write_folder(tmp / f"reference_{pack_name}_{len(out)}",
                                      packs.reference_files(pack_name, reference))
            out.append(Case(f"reference/{pack_name}", root, None, pack_name))
        for m in mutants:
            lines = changed_lines(reference_source(m.reference), m.source())
            out.append(Case(m.id, packs.write_folder(tmp / m.id, packs.folder_files(m)), m.cause, pack_name, lines,
                            bug_file=packs.bug_file(m, lines)))
    return out


def lm_cases(tmp: Path) -> list[Case]:
    """lm: the reference and the corpus's correct styles (repositories and files), every lm mutant as a repo."""
    from mutants import LM_MUTANTS
    from mutants.lm_export import mutant_repo_files, reference_repo_files, reference_single_file

    def write_repo(name, files):
        root = tmp / name
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        return root
    (tmp / "reference_lm.py").write_text(reference_single_file())
    out = [Case("reference/lm (repo)", write_repo("reference_lm_repo", reference_repo_files()), None, LM.name),
           Case("reference/lm (file)", tmp / "reference_lm.py", None, LM.name)]
    correct = ROOT / "tests" / "corpus" / LM.name / "correct"      # the corpus: a folder per assignment
    for p in sorted(correct.glob("*")) if correct.is_dir() else []:
        if p.suffix == ".py" or (p.is_dir() and (p / "tests" / "adapters.py").is_file()):
            out.append(Case(f"corpus/lm/{p.name}", p, None, LM.name))
    reference = reference_repo_files()
    for m in LM_MUTANTS:
        files = mutant_repo_files(m)
        rel = lm_mutated_file(m)      # line numbers of the exported file (its docstring is replaced)
        out.append(Case(m.id, write_repo(m.id, files), m.cause, m.assignment, changed_lines(reference[rel], files[rel]),
                        component=m.component.replace("_", "-"), bug_file=rel))
    return out


def lm_mutated_file(m) -> str:
    """The repository file an lm mutant's edit is in: the adapters or the model module."""
    from mutants.lm_export import ADAPTERS, MODULE, PACKAGE
    return "tests/adapters.py" if m.reference == ADAPTERS else f"{PACKAGE}/{MODULE}.py"


def run_cases(cases, quick=False, jobs=1, seed=0, timeout=300.0, on_done=None):
    def one(case):
        t = time.monotonic()
        r = check_file(case.path, assignment=case.assignment, quick=quick, seed=seed,
                       limits=Limits(timeout_s=timeout, threads=1 if jobs > 1 else 0,
                                     cores=2 if 2 * jobs <= (os.cpu_count() or 1) else 1, warm=True))
        diags = r["diagnoses"]
        row = {"case": case.name, "expected": case.expected, "top": diags[0]["id"] if diags else None,
               "top_confidence": diags[0]["confidence"] if diags else None,
               "others": [(d["id"], d["confidence"]) for d in diags[1:]],
               "verdict": r["verdict"], "seconds": round(time.monotonic() - t, 2),
               "line": ((diags[0].get("location") or {}).get("line") if diags else None),
               "file": ((diags[0].get("location") or {}).get("file") if diags else None),
               "bug_lines": list(case.bug_lines), "bug_file": case.bug_file}
        row["line_ok"] = row["line"] in case.bug_lines if case.bug_lines else None
        if case.bug_file and row["line_ok"]:      # a repository or a pack: the line must be in a mutated file
            files = case.bug_file if isinstance(case.bug_file, tuple) else (case.bug_file,)
            row["line_ok"] = any(str(row["file"] or "").replace("\\", "/").endswith(f) for f in files)
        row["ok"] = (row["top"] == case.expected) if case.expected else r["verdict"] == "clean"
        if case.component:            # lm, first round: the top diagnosis names the mutant's component
            row["top_component"] = diags[0].get("component") if diags else None
            row["ok"] = row["top_component"] == case.component
            row["cause_ok"] = row["top"] == case.expected
            row["top"] = f"{row['top']} [{row['top_component']}]"
        # a second diagnosis >= 0.5, unless it is the mutant's own cause at another of its edited lines (a
        # mutant with two edits, e.g. a model's batched mask and the attention that mis-broadcasts it)
        row["second_strong"] = bool(case.expected) and any(
            d["confidence"] >= 0.5 and not (d["id"] == case.expected and
                                            (d.get("location") or {}).get("line") in case.bug_lines)
            for d in diags[1:])
        if on_done:
            on_done(row)
        return row
    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(one, cases))
    finally:
        from .isolation import warm
        warm.close_all()        # the warm workers the cases ran in (warm.py)


def summarise(rows) -> dict:
    mut = [r for r in rows if r["expected"]]
    ok_mut = [r for r in mut if r["ok"]]
    clean = [r for r in rows if not r["expected"]]
    false_alarms = [r for r in clean if not r["ok"]]
    secs = sorted(r["seconds"] for r in rows)
    return {"mutants": len(mut), "top1_correct": len(ok_mut), "accuracy": len(ok_mut) / max(len(mut), 1),
            "correct_cases": len(clean), "false_alarms": len(false_alarms),
            "second_strong": sum(r["second_strong"] for r in mut),
            "located": sum(1 for r in mut if r.get("line_ok")), "single_line_mutants":
                sum(1 for r in mut if len(r.get("bug_lines") or ()) == 1),
            "single_line_located": sum(1 for r in mut if len(r.get("bug_lines") or ()) == 1 and r.get("line_ok")),
            "cause_top1": sum(1 for r in mut if r.get("cause_ok")),
            "median_s": secs[len(secs) // 2] if secs else None, "passed":
                len(ok_mut) == len(mut) and not false_alarms and not any(r["second_strong"] for r in mut)}


def table(rows, summary) -> str:
    w = max([len(r["case"]) for r in rows] + [10])
    lines = [f"{'case':{w}}  {'expected':28}  {'top diagnosis':28}  ok   secs   line (bug lines)"]
    for r in rows:
        exp = r["expected"] or "(clean)"
        top = r["top"] or "(clean)"
        mark = "yes" if r["ok"] and not r["second_strong"] else "NO"
        extra = "" if not r["second_strong"] else "  second >= 0.5: " + \
            ", ".join(f"{i} {c}" for i, c in r["others"] if c >= 0.5)
        shown = r["line"] if not r.get("bug_file") else f"{str(r.get('file') or '?').split('/')[-1]}:{r['line']}"
        bug = ','.join(map(str, r['bug_lines'][:4]))
        named = r.get("bug_file")
        named = "|".join(named) if isinstance(named, (list, tuple)) else named
        bug = bug if not named else f"{'|'.join(n.split('/')[-1] for n in named.split('|'))}:{bug}"
        where = "" if not r["expected"] else f"  {shown} ({bug}){'' if r['line_ok'] else ' !'}"
        lines.append(f"{r['case']:{w}}  {exp:28}  {top:28}  {mark:4} {r['seconds']:5.1f}{where}{extra}")
    s = summary
    lines.append(f"\nmutants: {s['top1_correct']}/{s['mutants']} top-1 correct ({s['accuracy']:.0%}); "
                 f"false alarms on correct code: {s['false_alarms']}/{s['correct_cases']}; "
                 f"mutants with a second diagnosis >= 0.5: {s['second_strong']}; median {s['median_s']} s per check\n"
                 + (f"lm: top diagnosis is the mutant's own cause (fingerprint) for {s['cause_top1']}/{s['mutants']}\n"
                    if any("cause_ok" in r for r in rows) else "")
                 + f"reported line on the mutated line: {s['located']}/{s['mutants']} "
                 f"(single-line mutants: {s['single_line_located']}/{s['single_line_mutants']})")
    return "\n".join(lines)


@click.command()
@click.option("--quick", is_flag=True, help="Skip the training probes.")
@click.option("--jobs", type=int, default=1, show_default=True)
@click.option("--assignment", type=click.Choice(list(NAMES)), default=None)
@click.option("--only", default=None, help="Only cases whose name contains this text.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def selftest(quick, jobs, assignment, only, as_json):
    """Run the reference, the lesson's code and every mutant through `check`; print the confusion table."""
    with tempfile.TemporaryDirectory(prefix="mtxdiag-selftest-") as tmp:
        cases = correct_cases() + mutant_cases(Path(tmp), assignment)
        if assignment_of(assignment).is_repository:   # lm's mutants: a separate registry, checked as repositories
            cases = lm_cases(Path(tmp))
        elif folder_pack_of(assignment) is not None:   # a folder pack's: its
            # reference and mutants as assignment folders (a one-file pack's, block's, are the file cases below)
            cases = pack_cases(Path(tmp), assignment)
        elif assignment is None:
            cases += pack_cases(Path(tmp))
        elif assignment:
            cases = [c for c in cases if c.assignment in (assignment, AUTO) and
                     (c.assignment != AUTO or assignment in c.name or BLOCK.name not in c.name)]
        if only:
            cases = [c for c in cases if only in c.name]

        def progress(row):
            click.echo(f"selftest: {row['case']}: {row['top'] or 'clean'} ({row['seconds']} s)", err=True)
        rows = run_cases(cases, quick=quick, jobs=jobs, on_done=progress)
    s = summarise(rows)
    if as_json:
        click.echo(json.dumps({"summary": s, "rows": rows}, indent=2))
    else:
        click.echo(table(rows, s))
    sys.exit(0 if s["passed"] else 1)
