"""A verified repair in words: the diff of the student's lines and the before/after numbers, at the hint level
an instructor chose (cause only, cause and line, the patch)."""
from __future__ import annotations

import re

HINT_LEVELS = ("cause", "line", "patch")
DEFAULT_HINT = "line"      # what Gradescope showed before repairs existed: the cause, its fix and its line


def summary(repair: dict | None, numbers: bool = True) -> str | None:
    """One line: what the verified edit changed and what it measured, or why nothing was verified."""
    if not repair:
        return None
    if not repair.get("verified"):
        return f"no repair verified ({repair.get('tried', 0)} candidate edits of the line re-checked)"
    who = "found by search, a suggestion" if repair.get("found_by") == "search" else "the usual fix"
    head = f"repair verified ({who}): {repair.get('label')} at line {repair.get('line')}"
    skipped = repair.get("unmeasured") or []
    carried = repair.get("carried") or []
    return head + (("; " + "; ".join(repair.get("changes") or [])) if numbers else "") + \
        "; every other check unchanged" + (f" (could not measure on the patched file: {', '.join(skipped)})"
                                           if skipped else "") + \
        (f" ({len(carried)} probes that never ran the edited code not re-run)" if carried else "") + \
        not_rerun_text(repair)


def not_rerun_text(repair: dict) -> str:
    """What a verified repair's re-check did not run (a full check's training probes, which the quick re-check
    leaves out): neither compared nor counted as passing."""
    left = repair.get("not_rerun") or []
    return f" (not re-run by the quick re-check, not compared: {', '.join(left)})" if left else ""


def diff_lines(repair: dict | None) -> list[str]:
    """The unified diff's lines without the two file-name headers."""
    if not repair or not repair.get("verified") or not repair.get("diff"):
        return []
    return [ln for ln in repair["diff"].splitlines() if not ln.startswith(("---", "+++"))]


def hint_text(d: dict, level: str) -> list[str]:
    """What a student is shown about diagnosis `d` beyond its title, evidence and fix: nothing more at
    `cause` (the line is left out too), the line at `line`, the verified patch too at `patch`."""
    out = []
    if level == "patch":
        s = summary(d.get("repair"))
        if s and d["repair"].get("verified"):
            out += [s, "Patch:"] + ["    " + ln for ln in diff_lines(d["repair"])]
    return out


def view(repair) -> dict | None:
    """The HTML report's repair block: a title line, the before/after numbers, the diff's rows (sign, text)."""
    if not isinstance(repair, dict):
        return None
    rows = [({"+": "add", "-": "del", "@": "hunk"}.get(ln[:1], "ctx"), str(ln)[:300]) for ln in diff_lines(repair)[:80]]
    return {"verified": bool(repair.get("verified")), "search": repair.get("found_by") == "search",
            "summary": (summary(repair, numbers=False) or "")[:1000], "changes": [str(c)[:300] for c in repair.get("changes") or []][:10],
            "rows": rows}


_LINE = re.compile(r"\b(lines?|cell) \d+(\s*(-|to|and)\s*\d+)?", re.I)


def redact_lines(text: str) -> str:
    """The `cause` hint level: evidence keeps its numbers, not where in the file they were measured."""
    return _LINE.sub("a line of your code", text)
