"""Gradescope's results.json, checked against its documented format (torch-free; no grader import).

https://gradescope-autograders.readthedocs.io/en/latest/specs/ lists the top-level keys, each test's keys,
the visibility values and the output formats. `violations(text)` says what of a results.json Gradescope would
reject or misread, one line each; `mtxdiag gradescope run` (gradescope_run.py) exits non-zero on any.

Stricter than Gradescope where mtxdiag's own promise is stricter: every test has a name, a score and a
max_score; the file is strict JSON (no NaN or Infinity, which Python writes and JSON does not allow) and its
text has no unpaired surrogate. A test whose output_format is "md" may hold no raw HTML outside code (md.py
escapes or fences what came from the student's code).
"""
from __future__ import annotations

import json
import math
import re

TOP_KEYS = frozenset({"score", "execution_time", "output", "output_format", "test_output_format",
                      "test_name_format", "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"})
TEST_KEYS = frozenset({"score", "max_score", "status", "name", "name_format", "number", "output", "output_format",
                       "tags", "visibility", "extra_data"})
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
FORMATS = ("text", "html", "simple_format", "md", "ansi")
TEST_STATUSES = ("passed", "failed")
_HTML = re.compile(r"(?<!\\)<[A-Za-z/!?]")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON (Gradescope's parser rejects it)")


def _surrogates(obj: object, where: str, out: list[str]) -> None:
    if isinstance(obj, str):
        if any(0xD800 <= ord(ch) <= 0xDFFF for ch in obj):
            out.append(f"{where}: holds an unpaired surrogate (not valid Unicode)")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _surrogates(k, where, out)
            _surrogates(v, f"{where}.{k}", out)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _surrogates(v, f"{where}[{i}]", out)


def raw_html(markdown: str) -> bool:
    """Whether Markdown text holds an HTML tag outside fenced code blocks and code spans."""
    prose, fence = [], ""
    for line in markdown.split("\n"):
        m = _FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip(" `~"):
                fence = ""
            continue
        if m:
            fence = m.group(1)
            continue
        prose.append(line)
    text = re.sub(r"(`+)(.+?)\1", "", "\n".join(prose), flags=re.S)      # code spans (ends at the same run)
    return bool(_HTML.search(text))


def _format(d: dict, key: str, where: str, out: list[str]) -> None:
    if key in d and d[key] not in FORMATS:
        out.append(f"{where}{key} is {d[key]!r}, not one of {', '.join(FORMATS)}")


def _visibility(d: dict, key: str, where: str, out: list[str]) -> None:
    if key in d and d[key] not in VISIBILITIES:
        out.append(f"{where}{key} is {d[key]!r}, not one of {', '.join(VISIBILITIES)}")


def _test(i: int, t: object, default_format: object, out: list[str]) -> None:
    where = f"tests[{i}]."
    if not isinstance(t, dict):
        out.append(f"tests[{i}] is not an object")
        return
    for k in sorted(set(t) - TEST_KEYS):
        out.append(f"{where}{k} is not a key of Gradescope's test (known: {', '.join(sorted(TEST_KEYS))})")
    if not isinstance(t.get("name"), str) or not t.get("name"):
        out.append(f"{where}name is missing or not a non-empty string")
    for k in ("score", "max_score"):
        if not _number(t.get(k)):
            out.append(f"{where}{k} is missing or not a finite number: {t.get(k)!r}")
    if "output" in t and not isinstance(t["output"], str):
        out.append(f"{where}output is not a string")
    if "status" in t and t["status"] not in TEST_STATUSES:
        out.append(f"{where}status is {t['status']!r}, not passed or failed")
    if "number" in t and not isinstance(t["number"], str):
        out.append(f"{where}number is not a string")
    if "tags" in t and (not isinstance(t["tags"], list) or not all(isinstance(x, str) for x in t["tags"])):
        out.append(f"{where}tags is not a list of strings")
    if "extra_data" in t and not isinstance(t["extra_data"], dict):
        out.append(f"{where}extra_data is not an object")
    _visibility(t, "visibility", where, out)
    _format(t, "output_format", where, out)
    _format(t, "name_format", where, out)
    if t.get("output_format", default_format) == "md" and isinstance(t.get("output"), str) and raw_html(t["output"]):
        out.append(f"{where}output is Markdown holding raw HTML outside code (escape or fence the student's text)")


def check(data: object) -> list[str]:
    """What of a parsed results.json breaks Gradescope's format (empty: none)."""
    if not isinstance(data, dict):
        return ["results.json is not a JSON object"]
    out: list[str] = []
    for k in sorted(set(data) - TOP_KEYS):
        out.append(f"{k} is not a top-level key of Gradescope's results (known: {', '.join(sorted(TOP_KEYS))})")
    tests = data.get("tests")
    if "score" in data and not _number(data["score"]):
        out.append(f"score is not a finite number: {data['score']!r}")
    if "score" not in data and not (isinstance(tests, list) and tests):
        out.append("score is missing and there are no tests to sum")
    if "execution_time" in data and (not _number(data["execution_time"]) or data["execution_time"] < 0):
        out.append(f"execution_time is not a number of seconds: {data['execution_time']!r}")
    if "output" in data and not isinstance(data["output"], str):
        out.append("output is not a string")
    for k in ("output_format", "test_output_format", "test_name_format"):
        _format(data, k, "", out)
    for k in ("visibility", "stdout_visibility"):
        _visibility(data, k, "", out)
    if "extra_data" in data and not isinstance(data["extra_data"], dict):
        out.append("extra_data is not an object")
    if data.get("output_format") == "md" and isinstance(data.get("output"), str) and raw_html(data["output"]):
        out.append("output is Markdown holding raw HTML outside code")
    if "tests" in data:
        if not isinstance(tests, list):
            out.append("tests is not a list")
        else:
            for i, t in enumerate(tests):
                _test(i, t, data.get("test_output_format"), out)
    board = data.get("leaderboard")
    if "leaderboard" in data and (not isinstance(board, list) or not all(
            isinstance(e, dict) and isinstance(e.get("name"), str) and "value" in e for e in board)):
        out.append("leaderboard is not a list of {name, value} entries")
    _surrogates(data, "results", out)
    return out


def violations(text: str | bytes) -> list[str]:
    """check() of a results.json's text; a file that is not strict JSON is one violation."""
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError) as e:
        return [f"results.json is not valid JSON: {e}"]
    return check(data)


def max_score(data: dict) -> float | None:
    """The assignment's maximum as mtxdiag writes it (extra_data.max_score; Gradescope's own is its setting)."""
    extra = data.get("extra_data")
    value = extra.get("max_score") if isinstance(extra, dict) else None
    return float(value) if isinstance(value, (int, float)) and _number(value) else None
