"""A TOML writer for the small subset the autograder zip writes (gradescope_build.py): tables of strings,
booleans, integers, finite floats and arrays of them.

Strings are TOML basic strings with the spec's escapes (quote, backslash, control characters); keys are bare
when they may be, quoted otherwise. `dumps` parses its own text back with tomllib and compares it with what it
was given, so a value it cannot write faithfully fails here, in the instructor's build, not in Gradescope's.
"""
from __future__ import annotations

import math
import re
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:                                    # pragma: no cover - the project's dependency for 3.10
    import tomli as tomllib

_BARE = re.compile(r"[A-Za-z0-9_-]+\Z")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


class TomlWriteError(ValueError):
    """The value is outside the subset this writer handles, or did not read back the same."""


def string(s: str) -> str:
    """A TOML basic string: quote and backslash escaped, control characters as \\uXXXX (or their short form)."""
    out = []
    for ch in s:
        code = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        elif 0xD800 <= code <= 0xDFFF:
            raise TomlWriteError(f"an unpaired surrogate (U+{code:04X}) cannot be written in TOML: {s[:60]!r}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def key(k: str) -> str:
    if not isinstance(k, str):
        raise TomlWriteError(f"a TOML key must be a string, not {type(k).__name__}")
    return k if _BARE.match(k) else string(k)


def value(v: object) -> str:
    """One value: a string, bool, int, finite float or an array of values (no table inside an array)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise TomlWriteError(f"{v!r} is not written (only finite numbers)")
        return repr(v)
    if isinstance(v, str):
        return string(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value(x) for x in v) + "]"
    raise TomlWriteError(f"a {type(v).__name__} is not written as a TOML value")


def _table(path: list[str], table: dict, lines: list[str]) -> None:
    scalars = [(k, v) for k, v in table.items() if not isinstance(v, dict)]
    tables = [(k, v) for k, v in table.items() if isinstance(v, dict)]
    if path and (scalars or not tables):    # a table holding only tables is made by its children's headers
        if lines:
            lines.append("")
        lines.append("[" + ".".join(key(p) for p in path) + "]")
    for k, v in scalars:
        lines.append(f"{key(k)} = {value(v)}")
    for k, v in tables:
        _table(path + [k], v, lines)


def _plain(obj: object) -> object:
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


def dumps(doc: dict) -> str:
    """The TOML text of `doc` (nested dicts are tables), checked by reading it back."""
    if not isinstance(doc, dict):
        raise TomlWriteError("a TOML document is a table (a dict)")
    lines: list[str] = []
    _table([], doc, lines)
    text = "\n".join(lines) + "\n"
    try:
        back = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:        # a bug of this writer: never ship what does not parse
        raise TomlWriteError(f"the written TOML does not parse: {e}") from None
    if back != _plain(doc):
        raise TomlWriteError("the written TOML reads back different values")
    return text
