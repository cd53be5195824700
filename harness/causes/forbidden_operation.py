"""Forbidden operation: the submission's code tried something a model never needs - a network connection, files
or folders outside its own, another process, native code, replacing torch or the grader in sys.modules - or
printed far more than any check needs.

Two checks feed it: `forbidden-ops` (the child's audit hook, PEP 578: each attempt with the student's line,
what it targeted, and whether the sandbox blocked it) and `output-flood` (the parent: bytes printed). The
sandbox still blocks what it blocks; this finding is what lets the instructor know the code tried. It is an
integrity flag, not a bug of the model: the rubric decides what it costs (by default nothing).
"""
from ..assignments import FOLDER_PACKS, SINGLE_FILE
from .base import Cause, Finding, Observed, say

CAUSE = Cause(
    "forbidden-operation", "The code tried operations outside its own folder",
    "While being checked, the code opened network connections, read, wrote or listed files outside its own "
    "folder, started processes, loaded native code, replaced torch or the grader in sys.modules, or printed "
    "more than the output limit.",
    "A model and its training loop need none of this; the instructor is told so they can review the file. "
    "The sandbox blocks what it can regardless.",
    "Each attempt is listed with the line of your code, its target and whether it was blocked.",
    "Remove the code at the lines shown (file, network and process access, big prints) from the submitted file.",
    mechanism="the audit's record of each operation outside the submission's lane, with its line",
    observed=tuple(Observed(cid, "status", ("fail",)) for cid in ("forbidden-ops", "output-flood")),
    assignments=SINGLE_FILE + FOLDER_PACKS,     # integrity: a folder pack's assignment too
)

CHECKS = ("forbidden-ops", "output-flood")


def kinds(check: dict | None) -> list[tuple[str, int]]:
    """Every kind of operation the check recorded, with how many attempts of it (parent side: the child's
    `counts`, validated; a kind named only in `ops` counts once). Attempts of one kind, however many, never
    hide another kind."""
    data = (check or {}).get("data") if isinstance(check, dict) else None
    data = data if isinstance(data, dict) else {}
    counts = data.get("counts")
    counts = counts if isinstance(counts, dict) else {}
    ops = data.get("ops")
    ops = ops if isinstance(ops, list) else []
    out: dict[str, int] = {}
    for op, n in list(counts.items())[:40]:
        if isinstance(op, str) and op and isinstance(n, int) and not isinstance(n, bool) and n > 0:
            out[op[:40]] = min(n, 10 ** 9)
    for op in ops[:40]:
        if isinstance(op, str) and op:
            out.setdefault(op[:40], 1)
    return list(out.items())


def kinds_text(check: dict | None) -> str:
    """'list (60 times), subprocess, read, connect' ('' when none)."""
    return ", ".join(f"{op} ({n} times)" if n > 1 else op for op, n in kinds(check))


def diagnose(ev):
    failed = [c for c in (ev.failed(cid) for cid in CHECKS) if c]
    if not failed:
        return None
    location = next((c.get("location") for c in failed if c.get("location")), None)
    evidence = [say(c) for c in failed]
    shown = kinds_text(ev.failed("forbidden-ops"))
    if shown:
        evidence.insert(0, f"attempted, by kind: {shown}")
    return Finding(1.0, evidence, location, explains=CHECKS)
