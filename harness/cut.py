"""Shortening a text for display: at a word's end, marked with an ellipsis, never a word cut in two unmarked.

Every bound on a human-readable string (an exception's message in a check's detail, a line of evidence, a
terminal line) goes through `cut`: "(nothing correc" reads as a typo, "(nothing…" as a shortened text. Torch-free
and import-free, so that the child, the engine and the reports share it.
"""
from __future__ import annotations

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
