"""Markdown for what Gradescope renders (a test's output with output_format "md"): text that came from the
student's code (evidence, exception messages, file names) is shown as text, never as markup or HTML."""
from __future__ import annotations

import re

_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+!|~&-])")


def inline(text: object) -> str:
    """One line of literal text inside a Markdown paragraph: markup characters backslash-escaped (CommonMark
    allows it for every ASCII punctuation character), line breaks folded into spaces."""
    one_line = " ".join(str(text).split())
    return _SPECIAL.sub(r"\\\1", one_line)


def fence(text: object, info: str = "text") -> str:
    """A fenced code block holding `text` verbatim: its fence is longer than any run of backticks inside."""
    body = str(text).replace("\r\n", "\n").replace("\r", "\n")
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    bar = "`" * max(3, longest + 1)
    return f"{bar}{info}\n{body.rstrip(chr(10))}\n{bar}"


def code(text: object) -> str:
    """A code span holding `text` literally (one line): its backtick delimiters are longer than any run inside."""
    one_line = " ".join(str(text).split())
    if not one_line:
        return ""
    longest = max((len(m) for m in re.findall(r"`+", one_line)), default=0)
    bar = "`" * (longest + 1)
    pad = " " if one_line.startswith("`") or one_line.endswith("`") else ""
    return f"{bar}{pad}{one_line}{pad}{bar}"
