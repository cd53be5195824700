"""What a person reads: texts shortened at a word's end and marked, numbers that never read `nan`, measured
values that never read `None`.

Every bound on a human-readable string (an exception's message in a check's detail, a line of evidence, a
terminal line) goes through `cut`: a word cut in two reads as a typo, whole words and "…" as a shortened text. A
number written into a sentence goes through `num`, a measured value through `plain`. Torch-free and import-free,
so that the child, the engine and the reports share it.
"""
from __future__ import annotations

import math

MARK = "…"
_TRAILING = " \t\r\n,;:.([{/-–—"      # what a cut text should not end on before the mark


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def cut(text: object, limit: int, mark: str = MARK) -> str:
    """str(text) whole when it fits in `limit` characters; else its longest head that ends at the end of a word,
    then `mark`, all within `limit`. A word longer than half the room (a path, a hash) is cut inside, still
    marked. None is the empty string."""
    s = "" if text is None else str(text)
    if len(s) <= limit:
        return s
    room = limit - len(mark)
    if room <= 0:
        return mark[:max(limit, 0)]
    head = s[:room]
    if _word(s[room]) and _word(head[-1]):                    # the cut falls inside a word: back to its start
        start = room
        while start > 0 and _word(s[start - 1]):
            start -= 1
        if start >= room // 2:
            head = s[:start]
    kept = head.rstrip(_TRAILING)
    return (kept or head) + mark


NOT_A_NUMBER = "not a number"
MISSING = "—"                          # a value that was not measured (the reports' convention)


def num(v: object, spec: str = ".4g") -> str:
    """A number formatted with `spec`; NaN reads 'not a number', an infinity 'inf' or '-inf'."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return MISSING if v is None else str(v)
    if isinstance(v, float) and math.isnan(v):
        return NOT_A_NUMBER
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return format(v, spec)


def plain(v: object) -> str:
    """A measured value as evidence writes it: Python's own spelling (dicts, lists, quoted strings) but a missing
    value reads MISSING and a NaN 'not a number', never None or nan."""
    if v is None:
        return MISSING
    if isinstance(v, float) and not math.isfinite(v):
        return num(v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k!r}: {plain(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(plain(x) for x in v) + "]"
    if isinstance(v, tuple):
        return "(" + ", ".join(plain(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    return repr(v)
