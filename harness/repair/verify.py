"""A diagnosis proven by its repair: apply each candidate edit to a copy, re-check it, keep the one that repairs.

`recheck(code, only, extra, gate)` runs the normal check path (same sandbox, limits, warm worker) on a copy of
the submission holding `code`: `only` = just these probes, else the quick suite plus `extra`; `gate` = the
checks the candidate must pass, the re-check stopping at the first that does not (Limits.gate). A candidate is
*verified* when every failed check the diagnosis cites now passes and no check both runs measured got worse: no
passing re-run check fails, errs or skips (other failures that went are listed as also_fixed; a pass that cannot
measure the patched model is a change too: nothing else may move, not even from measured to unmeasured). What
the re-check did not run is no change and never a pass: a probe it left out or stopped before, or one its
options left out (a check with data.not_run: the training probes of a full check, which the quick re-check
reports as not run), is listed as not_rerun. Two stages keep it cheap: the
cited checks' probes alone first, a screen (most edits fail there, in well under a second), then the probes the
edit can reach (reached.py, affects.py; else the quick suite), the cited ones again among them in the suite's
order, which is what the result takes; the first candidate, usually the repair, goes to them at once. A
re-check shares its probes between its two processes, longest first by the checked run's timings (Limits.costs).
"""
from __future__ import annotations

import difflib
import itertools
import os
import re
import time

from ..readable import cut
from ..checks import DECLARED, PROBE_OF
from ..checks import passes as _passes
from .. import reached
from . import affects, catalogue, edit
from .show import not_rerun_text

OWNERS: dict[str, set] = {}            # a check id -> every probe that declares it (a few ids are shared)
for _probe, _checks in DECLARED.items():
    for _c in list(_checks) + [type("P", (), {"id": _probe})]:
        OWNERS.setdefault(_c.id, set()).add(_probe)
FAILED = ("fail", "error")
_CITED = re.compile(r"^(?:also explains |also (?:unreliable[^:]*: )?)?([a-z0-9][a-z0-9-]*): ")
MAX_DIAGNOSES = 3          # repairs are tried for the first few problem diagnoses (ranked)
MAX_TRIES = {"catalogue": 6, "search": 10}


def cited(diagnosis: dict, before: dict) -> list[str]:
    """The failed checks a diagnosis names in its evidence, in order."""
    out = []
    for line in diagnosis.get("evidence", []):
        m = _CITED.match(line)
        if m and before.get(m.group(1), {}).get("status") in FAILED and m.group(1) not in out:
            out.append(m.group(1))
    return out


def _probes(ids) -> list[str]:
    return sorted({PROBE_OF.get(i, i) for i in ids})


def not_run(c) -> bool:
    """A check its run's options left out (data.not_run: --quick's training probes): nothing was measured."""
    return isinstance(c, dict) and bool((c.get("data") or {}).get("not_run"))


def measured_probes(after: dict) -> set:
    """The probes a run measured: those it reports on, less those its options left out (not_run)."""
    return {PROBE_OF.get(i, i) for i, c in after.items() if not not_run(c)}


def changed(before: dict, after: dict, targets: list[str], others_cited: set) -> list[str]:
    """Re-run checks whose status moved for the worse: a pass that fails or errs, a failure that changed kind.
    Only the probes the re-check measured are compared: one it did not run (or ran as not_run) is no change,
    whatever the checked run measured there. (`others_cited`, the checks other diagnoses name, is kept for
    callers; a failure that goes is no harm.)"""
    rerun = measured_probes(after)
    out = []
    for i in sorted(set(before) | set(after)):
        if i in targets or PROBE_OF.get(i, i) not in rerun:
            continue
        b = None if not_run(before.get(i)) else before.get(i, {}).get("status")
        a = after.get(i, {}).get("status")
        if b == a or (b in FAILED and a in ("pass", "skip")):   # a failure more went (listed as also_fixed)
            continue
        if (b, a) == ("skip", "pass") or (b == "info" and a in ("pass", "skip")):   # measured now; a note
            continue       # that went. A pass that cannot measure the patched model (pass -> skip) is a change
        if b is None and a in ("pass", "skip", "info") or a is None and b in FAILED:
            continue
        if b == "skip" and a is None and _measured_now(i, after):   # a probe that could not measure (its
            continue                         # id, skip) now reports its own checks, none failing
        out.append(f"{i}: {b} -> {a}")
    return out


def _carried(r: dict) -> str:
    n = len(r.get("carried") or [])
    return (f" ({n} probes that never ran the edited code not re-run)" if n else "") + not_rerun_text(r)


def not_rerun(before: dict, after: dict, carried) -> list[str]:
    """The checks the checked run measured whose probe the re-check did not measure (so changed() did not compare
    them), less those of the probes carried over unchanged (they never ran the edited code)."""
    rerun, kept = measured_probes(after), set(carried)
    return sorted(i for i, c in before.items() if not not_run(c) and PROBE_OF.get(i, i) not in rerun
                  and not OWNERS.get(i, {i}) & kept)


def _measured_now(probe: str, after: dict) -> bool:
    mine = [c for i, c in after.items() if probe in OWNERS.get(i, {i}) and i != probe]
    return bool(mine) and all(c["status"] in ("pass", "skip", "info") for c in mine)


def number(v) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        return "0" if v == 0 else f"{v:.4g}"
    if isinstance(v, (int, str)):
        return cut(v, 60)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {number(x)}" for k, x in list(v.items())[:4]) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(number(x) for x in v[:6]) + "]"
    return cut(v, 60)


def change(check_id: str, b, a) -> str:
    """`causal-leak: 0.2227 -> 0`; for measurements that are records, the fields that moved."""
    if isinstance(b, dict) and isinstance(a, dict):
        moved = [f"{k} {number(b[k])} -> {number(a.get(k))}" for k in b if b[k] != a.get(k)][:3]
        if moved:
            return f"{check_id}: " + ", ".join(moved)
    return f"{check_id}: {number(b)} -> {number(a)}"


def diff(source: str, code: str, name: str) -> str:
    return "".join(difflib.unified_diff(source.splitlines(True), code.splitlines(True), f"a/{name}", f"b/{name}",
                                        n=1))


def _own_lines(d: dict, before: dict, targets: list[str]) -> list[int]:
    """Where the cited checks' property first broke (their divergence), then the diagnosis's own line."""
    out = []
    for t in targets:
        div = ((before.get(t) or {}).get("data") or {}).get("divergence")
        if isinstance(div, dict) and isinstance(div.get("line"), int) and div["line"] not in out:
            out.append(div["line"])
    line = (d.get("location") or {}).get("line")
    if isinstance(line, int) and line not in out:
        out.append(line)
    return out


def search_lines(d: dict, before: dict, targets: list[str], source: str = "") -> list[int]:
    """Where the property first broke (the cited checks' first divergence), then the diagnosis's own line,
    then the lines next to the last of these in the data's path (edit.related)."""
    out = _own_lines(d, before, targets)[:2]
    for ln in edit.related(source, out[-1]) if out else []:    # where its value was made, used, guarded
        if ln not in out:
            out.append(ln)
    return out


def edited_lines(source: str, code: str) -> set[int]:
    """The lines of the original file an edit touches (1-based): those it replaces or removes, and the two
    either side of a place where it only inserts."""
    sm = difflib.SequenceMatcher(None, source.splitlines(), code.splitlines(), autojunk=False)
    out: set[int] = set()
    for op, i1, i2, _, _ in sm.get_opcodes():
        if op in ("replace", "delete"):
            out.update(range(i1 + 1, i2 + 1))
        elif op == "insert":
            out.update({i1, i1 + 1} - {0})
    return out


def _recheck_plan(code: str, source: str, before: dict, coverage: dict | None, cited_probes: list[str]):
    """(the probes to re-run beyond the cited ones, the probes carried over) when the record of which functions
    each probe ran (reached.py) tells which ones reached the edit; None: the whole quick suite re-runs."""
    by = coverage.get("probes") if coverage else None
    if not by:
        return None
    ran = set(by) - {reached.LOAD}
    if any(i in OWNERS and not OWNERS[i] & ran for i in before):     # a check whose probe left no record
        return None
    sel = reached.to_rerun(coverage, affects.effect_lines(source, code, edited_lines(source, code)), ran)
    if sel is None:
        return None
    return sorted(sel - set(cited_probes)), sorted(ran - sel - set(cited_probes))


def _verify(cands, source, name, before, targets, others_cited, recheck, found_by, tried, rejected, coverage=None):
    """The first candidate that verifies, as a `repair`; None when none does (tried/rejected are filled)."""
    cited_p = _probes(targets)
    only = extra = ",".join(cited_p)
    gate = ",".join(targets)        # a re-check that runs a target's probe stops once a target fails there
    for c in cands:
        tried.append(c.code)
        plan = _recheck_plan(c.code, source, before, coverage, cited_p)
        # the first candidate (the cause's usual fix, which mostly repairs) goes straight to every probe it
        # needs, stopping early if it does not repair; later ones pass the cited checks' probes alone first
        first = None
        if len(tried) > 1 or (plan is not None and not plan[0]):
            first = recheck(c.code, only, "", gate)
            if not _passes(first, targets):
                continue
        # a screen that passed proves nothing yet: the cited probes ran there without the probes the suite
        # runs before them, and what a probe measures can depend on them (state the student's module keeps
        # across probes, e.g. a cached mask changed in place); they run again, in the suite's order, with
        # every probe the edit can reach. When the edit reaches no other probe, that run is the screen itself
        # (the same probes, the same order) and is not repeated
        carried: list[str] = []
        if plan is None:
            full = recheck(c.code, "", extra, gate)
        else:
            rest, carried = plan
            full = first if first is not None and not rest else \
                recheck(c.code, ",".join(sorted(set(rest) | set(cited_p))), "", gate)
        moved = changed(before, full, targets, others_cited)
        if not _passes(full, targets) or moved:
            rejected.append({"label": c.label, "changed": moved, "removed_failure": _passes(full, targets)})
            continue
        return {"verified": True, "found_by": found_by, "kind": c.kind, "label": c.label, "line": c.line,
                "diff": diff(source, c.code, name),
                "before": {t: before[t].get("measured") for t in targets},
                "after": {t: (full.get(t) or {}).get("measured") for t in targets},
                "changes": [change(t, before[t].get("measured"), (full.get(t) or {}).get("measured")) for t in targets],
                "also_fixed": sorted(i for i, c in before.items() if c["status"] in FAILED and i not in targets
                                     and (full.get(i) or {}).get("status") in ("pass", "skip")
                                     and not not_run(full.get(i))),
                "unmeasured": sorted(i for i, c in full.items() if c["status"] == "skip" and not not_run(c) and
                                     (before.get(i) or {}).get("status") == "pass"),
                "tried": len(tried), "carried": carried, "not_rerun": not_rerun(before, full, carried)}
    return None


def _lines(source: str, line: int):
    """The diagnosis's line, then where a module it calls is built, then the lines next to it in the data's
    path; each further list is worked out only once the candidates before it are used up (the usual fix, at
    the line itself, mostly verifies: its re-check need not wait for the rest)."""
    seen = []
    for more in (lambda: [line], lambda: edit.constructed(source, line), lambda: edit.related(source, line)):
        for ln in more():
            if ln not in seen:
                seen.append(ln)
                yield ln


def _in_order(lines, source: str, kinds: tuple):
    """The cause's candidates line by line, then in the cause's order of kinds, each line's edits listed and
    each text made when its turn comes; within a LATER_FIRST kind (catalogue.py) the later change first."""
    seen, n = {source}, 0
    for ln in lines:
        pend = sorted(edit.pending(source, ln, kinds), key=lambda p: kinds.index(p.kind))     # stable
        for kind, group in itertools.groupby(pend, key=lambda p: p.kind):
            made = edit.made(group, seen, MAX_TRIES["catalogue"] - n)
            if kind in catalogue.LATER_FIRST:
                made = iter(sorted(made, key=lambda c: -len(os.path.commonprefix([source, c.code]))))
            for c in made:
                if n >= MAX_TRIES["catalogue"]:
                    return
                n += 1
                yield c
        if n >= MAX_TRIES["catalogue"]:
            return


def try_one(d: dict, source: str, name: str, before: dict, others_cited: set, recheck,
            coverage: dict | None = None) -> dict | None:
    """The `repair` of one diagnosis: the cause's usual edits at its line, then (none verified, or a failure
    outside the catalogue) the generic search where the property first broke. None: no edit to try."""
    targets = cited(d, before)
    if not targets or d["id"] in catalogue.NEVER:
        return None
    tried, rejected, usual = [], [], 0
    kinds = catalogue.BY_CAUSE.get(d["id"])
    line = (d.get("location") or {}).get("line")
    if kinds and isinstance(line, int):
        # the located line's edits, then those where a module it calls is built (its argument set there), then
        # the lines next to it in the data's path: where a value it reads was made (`future = torch.triu(...)`
        # for a diagnosis at `return pad | future`), where its value is used, the condition it runs under
        cands = _in_order(_lines(source, line), source, kinds)
        r = _verify(cands, source, name, before, targets, others_cited, recheck,
                    "catalogue", tried, rejected, coverage)
        usual = len(tried)
        if r is not None:
            return r
    removed = next((x for x in rejected if x["removed_failure"]), None)    # the usual fix, with a side effect
    # the usual fix failed, had no edit at the line, or the cause has none: the generic search
    pend = [p for ln in search_lines(d, before, targets, source) for p in edit.pending(source, ln, catalogue.SEARCH)]
    pend.sort(key=lambda c: 0 if c.kind in catalogue.FIRST else 2 if c.kind in catalogue.LAST else 1)   # stable
    cands = edit.made(pend, set(tried) | {source}, MAX_TRIES["search"])
    r = _verify(cands, source, name, before, targets, others_cited, recheck, "search",
                tried, rejected, coverage)
    if r is not None:
        return dict(r, usual_tried=usual, usual_side_effect=removed)
    if not tried:
        return None
    return {"verified": False, "found_by": "catalogue" if usual else "search", "tried": len(tried),
            "usual_tried": usual, "diff": None, "before": None, "after": None, "rejected": rejected[:3],
            "usual_side_effect": removed}


def will_try(result: dict) -> bool:
    """Some problem diagnosis has edits to try (try_one): it cites a failed check and names a line, its own or
    where a cited check's property first broke. Then `repair` is likely to re-check."""
    before = {c["id"]: c for c in result.get("checks", []) if isinstance(c, dict) and "id" in c}
    for d in result.get("diagnoses", []):
        if isinstance(d, dict) and d.get("severity", "problem") != "info" and d.get("id") not in catalogue.NEVER:
            targets = cited(d, before)
            if targets and _own_lines(d, before, targets):
                return True
    return False


def repair(result: dict, source: str, name: str, recheck, max_diagnoses: int = MAX_DIAGNOSES,
           coverage: dict | None = None) -> dict:
    """Give the first problem diagnoses a `repair` (in place); adjust confidence and order. Returns timings.
    coverage: which functions each probe of the check ran (reached.py): re-checks skip the probes that never
    reached an edited line."""
    t0 = time.monotonic()
    before = {c["id"]: c for c in result.get("checks", [])}
    diags = [d for d in result.get("diagnoses", []) if d.get("severity", "problem") != "info"]
    every = {d["id"]: set(cited(d, before)) for d in diags}
    n = 0
    for d in diags:
        if n >= max_diagnoses:
            break
        others = set().union(*[v for k, v in every.items() if k != d["id"]]) if len(every) > 1 else set()
        r = try_one(d, source, name, before, others, recheck, coverage)
        if r is None:
            continue
        n += 1
        d["repair"] = r
        if r["verified"] and r["found_by"] == "catalogue":
            d["confidence"] = max(d["confidence"], 0.95)
            d["evidence"].append("repair verified: " + "; ".join(r["changes"]) + f" after {r['label']} at line "
                                 f"{r['line']}, every other check unchanged" + _carried(r))
            continue
        side = r.get("usual_side_effect")
        if side:       # the cause is confirmed by the usual edit; only its proof is not clean
            d["evidence"].append(f"the usual fix ({side['label']}) removed the failure but changed another "
                                 f"check ({'; '.join(side['changed'][:3])}): not verified")
        elif r.get("usual_tried"):
            d["confidence"] = round(d["confidence"] * 0.75, 2)
            d["evidence"].append(f"the usual fix for this cause did not remove the failure ({r['usual_tried']} "
                                 f"edits at line {(d.get('location') or {}).get('line')} and next to it tried)")
        if r["verified"]:
            d["evidence"].append(f"a repair found by search at line {r['line']} (a suggestion): {r['label']} (" +
                                 "; ".join(r["changes"]) + ", every other check unchanged" + _carried(r) + ")")
    result["diagnoses"].sort(key=lambda d: (not (d.get("repair") or {}).get("verified"), -d["confidence"]))
    return {"repair_s": round(time.monotonic() - t0, 3), "repaired": n}
