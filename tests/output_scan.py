"""What a user reads must never show a Python `None`, a `nan`, or a text cut inside a word ("(nothing correc",
"ImportErro…"). A checker for the three outputs of a check, importable from every tier (pyproject's pytest
pythonpath holds tests/):

    problems = scan(terminal=summary_text, html=report_html, result=result_json, sources=[submission_text])
    assert not problems, "\n".join(problems)

What it reads: the terminal summary line by line, the HTML report's visible text (not scripts, styles, or the
student's code: <pre>, <code>, the source excerpts), and the result JSON's strings but the raw ones (stdout,
stderr, code, paths). Code quoted in `backticks`, or after the terminal's "│", is the student's and not read.

A cut word is a word of the output that no source of the text spells whole but that begins a word they do spell:
the sources are the harness's own code (every message is written there), the reference and the mutants, and
`sources` (the student's file). "correc" begins "correct" and is spelt nowhere: cut. A word the harness never
spells and that begins none of its words (a torch message's) is not judged.
"""
from __future__ import annotations

import bisect
import functools
import json
import re
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "reference_model", "mutants")
RAW_KEYS = frozenset({"stdout", "stderr", "code", "submission", "file", "path", "harness_version", "diff", "rows",
                      "lines", "source", "id"})
# a word: letters (camelCase whole); identifiers (snake_case, with digits), dotted names and paths are code, not read
_TOKEN = re.compile(r"(?<![\w.])[A-Za-z]+(?!\w)(?!\.\w)")
_PATHISH = re.compile(r"\S*[/\\]\S*")
# Python's None, but where the text names what the student's code did ("returned None", "device=None")
_NONE = re.compile(r"(?<![\w.=])(?<!returned )(?<!returns )(?<!return )None(?!\w)")
# a number printed as nan (Python's spelling, any sign); "NaN" in prose ("0/0 = NaN") is the house's word for it,
# flagged only when it is the whole text (a table cell)
_NAN = re.compile(r"(?<![\w.\-])[-+]?nan(?![\w\-])|^\s*[-+]?NaN\s*$")
_BACKTICKS = re.compile(r"`[^`\n]*`")
_MARKS = ("…", "...")


@functools.lru_cache(maxsize=1)
def _harness_words() -> frozenset[str]:
    words: set[str] = set()
    for pkg in PACKAGES:
        for f in (ROOT / pkg).rglob("*"):
            if f.suffix in (".py", ".html", ".toml") and "__pycache__" not in f.parts:
                words.update(_words(f.read_text(encoding="utf-8", errors="replace")))
    return frozenset(words)


def _words(text: str) -> list[str]:
    return [w.lower() for w in re.findall(r"[A-Za-z]+", _PATHISH.sub(" ", text))]


class _Vocabulary:
    def __init__(self, extra: list[str]):
        words = set(_harness_words())
        for t in extra:
            words.update(_words(t))
        self.words = words
        self.sorted = sorted(words)

    def cut_word(self, w: str) -> bool:
        """True when `w` is spelt nowhere whole but begins a longer word that is."""
        w = w.lower()
        if w in self.words:
            return False
        i = bisect.bisect_left(self.sorted, w)
        return i < len(self.sorted) and self.sorted[i].startswith(w) and self.sorted[i] != w


def _readable(text: str) -> str:
    """The text less what is code: `quoted` spans."""
    return _BACKTICKS.sub(" ", text)


def check_text(where: str, text: str, vocab: _Vocabulary) -> list[str]:
    """The problems of one piece of text (a line, an HTML text node, a JSON string)."""
    out = []
    text = _readable(text)
    excerpt = " ".join(text.split())
    if len(excerpt) > 160:
        excerpt = excerpt[:157] + "..."
    if _NONE.search(text):
        out.append(f"{where}: shows None: {excerpt!r}")
    if _NAN.search(text):
        out.append(f"{where}: shows nan: {excerpt!r}")
    plain = _PATHISH.sub(" ", text)
    tokens = list(_TOKEN.finditer(plain))
    for m in tokens:
        w = m.group()
        rest = plain[m.end():]
        at_end = not rest.strip() or rest.lstrip().startswith(_MARKS)
        if (len(w) >= 3 or (at_end and len(w) == 2)) and vocab.cut_word(w):
            out.append(f"{where}: cut inside a word ({w!r}): {excerpt!r}")
    return out


class _Visible(HTMLParser):
    """The visible text nodes of an HTML page, less scripts, styles and code."""
    HIDDEN = {"script", "style", "pre", "code", "textarea"}
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[bool] = []          # per open element: is it (or an ancestor) hidden
        self.nodes: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        classes = (dict(attrs).get("class") or "").split()
        hidden = (bool(self.stack) and self.stack[-1]) or tag in self.HIDDEN or "src" in classes
        self.stack.append(hidden)

    def handle_startendtag(self, tag, attrs):
        pass

    def handle_endtag(self, tag):
        if tag not in self.VOID and self.stack:
            self.stack.pop()

    def handle_data(self, data):
        if not (self.stack and self.stack[-1]) and data.strip():
            self.nodes.append(data)


def html_text(html: str) -> list[str]:
    p = _Visible()
    p.feed(html)
    p.close()
    return p.nodes


def json_strings(value, path: str = "result") -> list[tuple[str, str]]:
    """(path, string) for every human-readable string of a result (or report) JSON."""
    out: list[tuple[str, str]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if str(k) not in RAW_KEYS:
                out += json_strings(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += json_strings(v, f"{path}[{i}]")
    elif isinstance(value, str):
        out.append((path, value))
    return out


_HUNK = re.compile(r"^\s*@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")


def _prose_lines(text: str, sources) -> list[tuple[int, str]]:
    """(number, line) of a terminal's lines less the code it quotes: a unified diff's hunks (a repair's patch:
    its `@@` line and the ` `, `-`, `+` lines under it at the same indentation) and any line that is, stripped,
    a line of the student's own sources."""
    theirs = {ln.strip() for s in sources for ln in s.splitlines() if len(ln.strip()) >= 8}
    out, hunk = [], None
    for n, line in enumerate(text.splitlines(), start=1):
        m = _HUNK.match(line)
        if m:
            hunk = len(line) - len(line.lstrip())
            continue
        if hunk is not None and len(line) > hunk and line[hunk] in " -+" and line[:hunk].strip() == "":
            continue
        hunk = None
        if line.strip() in theirs:
            continue
        out.append((n, line))
    return out


def scan(terminal: str | None = None, html: str | None = None, result=None, sources: list[str] | tuple = ()) \
        -> list[str]:
    """Every problem found, as 'where: what: excerpt' lines; [] when the outputs read well."""
    vocab = _Vocabulary(list(sources))
    out: list[str] = []
    if terminal is not None:
        for n, line in _prose_lines(terminal, sources):
            out += check_text(f"terminal line {n}", line.split("│", 1)[0], vocab)
    if html is not None:
        for n, node in enumerate(html_text(html), start=1):
            out += check_text(f"html text {n}", node, vocab)
    if result is not None:
        if isinstance(result, (str, bytes)):
            result = json.loads(result)
        for where, s in json_strings(result):
            out += check_text(where, s, vocab)
    return out
