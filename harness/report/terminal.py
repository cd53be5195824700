"""The terminal side of a check: a progress line on stderr while it runs, a one-screen summary after.

Colour only on a terminal, never when piped, never with NO_COLOR set (https://no-color.org), never with TERM=dumb.
The progress line animates (spinner, elapsed seconds) only on a terminal; piped, one plain line per phase (CI logs).
"""
from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import sys
import threading
import time

from ..assignments import assignment_of
from ..checks import not_measured
from ..packs.course import line as course_line
from ..readable import cut
from ..source import SubmissionError, code_cell_numbers, read_source
from .sanitize import clean, clean_block  # noqa: F401 (re-exported: the CLI and the reports use them)
from .text import as_dict

STATUS_ORDER = ("fail", "error", "skip", "info", "pass")
STATUS_COLOR = {"pass": "blue", "fail": "red", "error": "yellow", "skip": None, "info": "cyan"}


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except Exception:
        return False


def _color(stream) -> bool:
    """Colour for this stream: a terminal, NO_COLOR unset (any value, even empty, turns colour off), TERM not dumb."""
    return _isatty(stream) and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def _utf8(stream) -> bool:
    enc = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
    return enc in ("utf8", "utf8sig")


class Progress:
    """Which probe is running and for how long, so nobody stares at a silent prompt.

    On a terminal: one line redrawn in place, a spinner and the elapsed time, animated by a
    daemon thread between phases (brief training is one 45 s phase). Piped: a plain line per phase.
    `phase` may be called from any thread (the runner calls it from its reader thread).
    """

    FRAMES_UTF8 = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
    FRAMES_ASCII = "|/-\\"

    def __init__(self, stream=None, interval: float = 0.1):
        self.stream = stream if stream is not None else sys.stderr
        self.t0 = time.monotonic()
        self.tty = _isatty(self.stream) and os.environ.get("TERM") != "dumb"
        self.color = _color(self.stream)
        self.frames = self.FRAMES_UTF8 if _utf8(self.stream) else self.FRAMES_ASCII
        self.name, self.phase_t0, self.n = "starting", self.t0, 0
        self.interval, self._lock, self._stop = interval, threading.Lock(), threading.Event()
        self._thread: threading.Thread | None = None
        self._done = False
        if self.tty:   # animate from the start: the child takes a few seconds before its first phase
            self._start()
            atexit.register(self.done)

    def _start(self):
        if self._thread is None:
            self._thread = threading.Thread(target=self._spin, name="mtxdiag-progress", daemon=True)
            self._thread.start()

    def _elapsed(self) -> float:
        return time.monotonic() - self.t0

    def _line(self, frame: str) -> str:
        total = self._elapsed()
        here = time.monotonic() - self.phase_t0
        spin = f"\x1b[36m{frame}\x1b[0m" if self.color else frame
        name = f"\x1b[1m{self.name}\x1b[0m" if self.color else self.name
        width = shutil.get_terminal_size((80, 24)).columns
        extra = f" ({here:.0f}s)" if here >= 3 else ""
        text = f"{spin} mtxdiag {total:5.1f}s  {name}{extra}"
        visible = len(f"{frame} mtxdiag {total:5.1f}s  {self.name}{extra}")
        if visible >= width:     # never wrap: a wrapped line cannot be redrawn in place
            text = cut(f"{frame} mtxdiag {total:5.1f}s  {self.name}", max(width - 1, 10))
        return text

    def _draw(self, frame: str):
        try:
            self.stream.write("\r\x1b[K" + self._line(frame))
            self.stream.flush()
        except Exception:
            pass

    def _spin(self):
        i = 0
        while not self._stop.wait(self.interval):
            with self._lock:
                if self._done:
                    return
                i += 1
                self._draw(self.frames[i % len(self.frames)])

    def phase(self, name):
        with self._lock:
            if self._done:
                return
            self.name, self.phase_t0, self.n = cut(clean(name), 80), time.monotonic(), self.n + 1
            if self.tty:
                self._draw(self.frames[0])
                self._start()
            else:
                try:
                    self.stream.write(f"mtxdiag: {self._elapsed():5.1f}s  {self.name}\n")
                    self.stream.flush()
                except Exception:
                    pass

    def note(self, text):
        """A line of its own (e.g. why the check daemon was not used); the progress line goes on below it."""
        with self._lock:
            try:
                self.stream.write(("\r\x1b[K" if self.tty else "") + f"mtxdiag: {clean(text)}\n")
                self.stream.flush()
            except Exception:
                pass

    def done(self):
        with self._lock:
            if self._done:
                return
            self._done = True
            self._stop.set()
            if self.tty:
                try:
                    self.stream.write("\r\x1b[K")
                    self.stream.flush()
                except Exception:
                    pass
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)
        if self.tty:
            atexit.unregister(self.done)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.done()


# -- where, and the student's own line -------------------------------------------------------------

def where(loc, path=None) -> str:
    """'file:line', or 'file cell N (code cell K) line M' for a notebook (cell_name)."""
    if not isinstance(loc, dict):
        return ""
    f = loc.get("file") or "?"
    if loc.get("cell"):
        return f"{f} {cell_name(loc, path)} line {loc.get('cell_line') or '?'}"
    if loc.get("line"):
        return f"{f}:{loc['line']}"
    return ""


_where = where  # the old private name


def cell_name(loc, path=None) -> str:
    """A notebook cell as a student finds it: 'cell N (code cell K)'. N (the location's "cell") counts every
    cell from the top, markdown included, as they appear on the screen; K counts the code cells only, read from
    the notebook (`path`, else the location's file). Unreadable: 'cell N (counting markdown cells)'."""
    cell = loc.get("cell")
    k = notebook(path or loc.get("file"))[0].get(cell) if isinstance(cell, int) else None
    return f"cell {cell} (code cell {k})" if k else f"cell {cell} (counting markdown cells)"


def notebook(path) -> tuple[dict[int, int], dict[int, tuple[int, int]]]:
    """The notebook at `path` as the reports name its places, read once per version of the file: (its cells'
    code-cell numbers: source.code_cell_numbers, the flattened text's line -> (cell, line in the cell):
    source.Source.cell_map); empty when it is no readable notebook."""
    if not path or not str(path).endswith(".ipynb"):
        return {}, {}
    try:
        st = os.stat(path)
    except (OSError, TypeError, ValueError):
        return {}, {}
    return _notebook_of(str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=16)
def _notebook_of(path: str, _mtime_ns: int, size: int) -> tuple[dict[int, int], dict[int, tuple[int, int]]]:
    if size > MAX_SOURCE_BYTES:
        return {}, {}
    try:
        with open(path, "rb") as f:
            raw = f.read()
        return code_cell_numbers(raw), read_source(path, raw).cell_map or {}
    except (OSError, SubmissionError):
        return {}, {}


MAX_SOURCE_BYTES = 5_000_000


def _read_text(path) -> str | None:
    try:
        if os.path.getsize(path) > MAX_SOURCE_BYTES:
            return None
        with open(path, "rb") as f:
            return f.read().decode("utf-8", errors="replace")
    except (OSError, TypeError, ValueError):
        return None


def source_lines(path, loc) -> tuple[list[str], int, str] | None:
    """The lines to show for a location: (lines, the 1-based line to mark, a label), or None.

    For a .py file: the file and loc['line']. For a notebook: the code of cell loc['cell']
    (1-based over all cells, markdown included, as the loader counts) and loc['cell_line'].
    """
    if not isinstance(loc, dict):
        return None
    path = path or loc.get("file")
    if not path:
        return None
    text = _read_text(path)
    if text is None:
        return None
    if str(path).endswith(".ipynb"):
        cell, cl = loc.get("cell"), loc.get("cell_line")
        if not isinstance(cell, int) or not isinstance(cl, int):
            return None
        try:
            cells = json.loads(text).get("cells")
            src = cells[cell - 1].get("source", "")
        except (ValueError, AttributeError, IndexError, TypeError):
            return None
        src = "".join(s for s in src if isinstance(s, str)) if isinstance(src, list) else str(src)
        lines = src.splitlines()
        if not 1 <= cl <= len(lines):
            return None
        return lines, cl, f"{cell_name(loc, path)}, line {cl}"
    line = loc.get("line")
    lines = text.splitlines()
    if not isinstance(line, int) or not 1 <= line <= len(lines):
        return None
    return lines, line, f"line {line}"


def source_line(loc, path=None) -> str | None:
    got = source_lines(path, loc)
    if got is None:
        return None
    lines, n, _ = got
    return lines[n - 1].strip()


# -- the summary --------------------------------------------------------------------------------

def width_for(stream) -> int | None:
    """Columns to wrap at: COLUMNS when set, the terminal's width on a terminal, None (never wrap: whole lines
    for CI logs and notebooks) when piped."""
    cols = os.environ.get("COLUMNS", "").strip()
    if cols.isdigit() and int(cols) > 0:
        return int(cols)
    if _isatty(stream):
        return shutil.get_terminal_size((100, 24)).columns
    return None


def _short(text, width) -> str:
    return cut(" ".join(clean(text).split()), max(width, 2))


def _wrap(first: str, text, width: int | None, indent: int) -> list[str]:
    """`first` + text, wrapped at `width` with later lines under the text's start; one whole line when width is
    None. `first` may hold colour codes: `indent` is its visible width."""
    import textwrap
    text = " ".join(clean(text).split())
    if width is None:
        return [first + text]
    room = max(width - indent, 20)
    parts = textwrap.wrap(text, room, break_long_words=True, break_on_hyphens=False) or [""]
    return [first + parts[0]] + [" " * indent + p for p in parts[1:]]


def _wrap_code(first: str, more: str, code, width: int | None, indent: int) -> list[str]:
    """A quoted line of code as it is written: its inner spacing kept (never reflowed as prose), cut into pieces
    of the room left when it is wider, preferring a cut after a space; the first piece after `first`, the others
    after `more` (both of visible width `indent`)."""
    text = clean(code).strip()
    if width is None:
        return [first + text]
    room, parts = max(width - indent, 20), []
    while len(text) > room:
        cut = text.rfind(" ", room // 2, room) + 1 or room      # after a space in the right half, else hard
        parts.append(text[:cut])
        text = text[cut:]
    parts.append(text)
    return [first + parts[0]] + [more + p for p in parts[1:]]


def summary(result: object, json_path=None, html_path=None, color: bool | None = None,
            width: int | None = None, max_causes: int = 3) -> str:
    """Verdict, the top causes with one line of evidence and file:line each, where the reports are.

    Fits one screen: at most `max_causes` causes in full (about 5 lines each), the rest by name.
    """
    color = _color(sys.stdout) if color is None else color
    wrap_at = width_for(sys.stdout) if width is None else width
    if wrap_at is not None:
        wrap_at = max(40, int(wrap_at))
    width = min(wrap_at or 100, 140)           # for what stays one short line (titles, the list of more)

    def st(text, fg=None, bold=False, dim=False, reverse=False):
        if not color:
            return text
        import click
        kw = {k: True for k, on in (("bold", bold), ("dim", dim), ("reverse", reverse)) if on}  # False emits a reset
        return click.style(text, fg=fg, **kw)

    result = result if isinstance(result, dict) else {}       # whatever it is, a summary is printed
    v = result.get("verdict", "error")
    diagnoses = [d for d in result.get("diagnoses") or [] if isinstance(d, dict)]
    checks = [c for c in result.get("checks") or [] if isinstance(c, dict)]
    head = {"clean": st(" CLEAN ", "blue", True, reverse=True), "problems": st(" PROBLEMS ", "red", True, reverse=True),
            "error": st(" ERROR ", "yellow", True, reverse=True)}.get(v, st(f" {str(v).upper()} ", bold=True))
    timings = as_dict(result.get("timings"))
    total_s = timings.get("total_s")
    edition = next((as_dict(c.get("data")).get("edition") for c in checks if c.get("id") == "contract"), "")  # a pack's
    meta = [f"assignment {result.get('assignment') or '?'}" + (f" {clean(edition)[:20]}" if isinstance(edition, str) and edition else "")]
    if isinstance(total_s, (int, float)):
        meta.append(f"{total_s:.1f}s")
    if result.get("quick"):
        meta.append("quick: no training probes")
    sub, meta_text = clean(result.get("submission", "?")), "(" + ", ".join(meta) + ")"
    if wrap_at is not None and len(str(v)) + 3 + len(sub) + 2 + len(meta_text) > wrap_at:
        lines = [f"{head} {sub}", "  " + st(meta_text, dim=True)]     # the path alone; what it was, below
    else:
        lines = [f"{head} {sub}  " + st(meta_text, dim=True)]
    err = result.get("error")
    if isinstance(err, dict) and err.get("reason"):
        lines += [st(x, "yellow") for x in _wrap("  ", f"the check stopped: {err['reason']}", wrap_at, 2)]
    if v == "clean":
        n_pass = sum(1 for c in checks if c.get("status") == "pass")
        lines.append(f"  No problems found: {n_pass} of {len(checks)} checks passed.")
    elif diagnoses:
        n = len(diagnoses)
        lines.append("  1 likely cause:" if n == 1 else f"  {n} likely causes, most likely first:")
    for i, d in enumerate(diagnoses[:max_causes], start=1):
        conf = d.get("confidence")
        conf = f"{conf:.0%}" if isinstance(conf, (int, float)) else "?"
        ident = clean(d.get("id", "?"))
        head_w = 2 + len(str(i)) + 2 + len(ident) + 2          # "  1. id  ": the title's lines start under it
        got = _wrap(f"  {i}. {st(ident, 'cyan', True)}  ", d.get("title", ""),
                    None if wrap_at is None else wrap_at - len(conf) - 2, head_w)
        lines += got[:-1] + [got[-1] + "  " + st(conf, dim=True)]
        ev = d.get("evidence") or []
        if ev:
            lines += _wrap("     " + st("evidence ", dim=True), ev[0], wrap_at, 14)
        loc = d.get("location")
        at = clean(where(loc))
        if at:
            code = source_line(loc)
            at_line = "     " + st("at       ", dim=True) + st(at, bold=True)
            if code and (wrap_at is None or 14 + len(at) + 4 + len(clean(code).strip()) <= wrap_at):
                lines.append(at_line + st("  │ ", dim=True) + clean(code).strip())
            else:
                lines.append(at_line)
                if code:                     # its own line(s) when it does not fit beside the place
                    bar = "              " + st("│ ", dim=True)
                    lines += _wrap_code(bar, bar, code, wrap_at, 16)
        if d.get("fix"):
            lines += _wrap("     " + st("fix      ", dim=True), d["fix"], wrap_at, 14)
        if seen := course_line(d):
            lines += _wrap("     " + st("course   ", dim=True), f"{seen} (a real bug all the same)", wrap_at, 14)
    if len(diagnoses) > max_causes:
        rest = ", ".join(clean(d.get("id")) for d in diagnoses[max_causes:max_causes + 6])
        more = len(diagnoses) - max_causes
        lines.append("  " + _short(f"+ {more} more: {rest}" + (" …" if more > 6 else ""), width - 2))
    if assignment_of(result.get("assignment")).per_component and checks:   # the component checklist, build order
        from .lm_checklist import terminal_lines
        lines.extend(terminal_lines(result, width, st))
    for g in not_measured(result):     # required checks that did not run: never a silent skip
        lines += _wrap("  " + st("not measured ", "yellow", not g["explained"]), f"{g['id']}: {g['why']}", wrap_at, 15)
    counts: dict[object, int] = {}    # by status, as the result spells it
    for c in checks:
        counts[c.get("status")] = counts.get(c.get("status"), 0) + 1
    if counts:
        parts = [st(f"{counts[s]} {s}", STATUS_COLOR.get(s), s in ("fail", "error"))
                 for s in STATUS_ORDER if s in counts]
        parts += [f"{n} {s}" for s, n in counts.items() if s not in STATUS_ORDER]
        lines.append("  checks   " + " · ".join(parts))
    if isinstance(lim := result.get("limits"), dict) and lim.get("enforced_by"):   # what limited the run (isolation/enforce.py)
        lines.append("  " + st("limits   ", dim=True) + _short(limits_text(lim), width - 11))
    if html_path:
        lines.append("  report   " + st(clean(html_path), bold=True))
    if json_path:
        lines.append("  json     " + clean(json_path))
    text = "\n".join(lines)
    if not _utf8(sys.stdout):   # e.g. a C-locale CI log: keep the summary printable
        text = text.translate(ASCII_FALLBACK)
    return text


def limits_text(lim: dict) -> str:
    """One line: what limited the run and at what (the result's `limits`)."""
    how = str(lim.get("enforced_by"))
    by = {"cgroup-v2": "a cgroup v2 of its own", "rlimits": "rlimits, measured from outside"}.get(how, clean(how))
    parts = [f"{lim[k]} {unit}" for k, unit in (("memory_mb", "MB memory"), ("disk_mb", "MB disk"),
                                                 ("pids", "tasks"), ("cpus", "CPUs")) if isinstance(lim.get(k), int)]
    return f"enforced by {by}" + (f" ({', '.join(parts)})" if parts else "")


ASCII_FALLBACK = str.maketrans({"…": "...", "│": "|", "·": "-", "—": "-"})


def report_line(html_path, color: bool | None = None) -> str:
    """The summary's `report` line, printed once the HTML report is written (after the summary)."""
    color = _color(sys.stdout) if color is None else color
    if not color:
        return f"  report   {clean(html_path)}"
    import click
    return "  report   " + click.style(clean(html_path), bold=True)


def repairs(result: dict, color: bool | None = None) -> str:
    """Each diagnosis's repair (issue 30): the verified patch as a diff of the student's lines with the
    before/after numbers, or that the usual fix did not remove the failure. '' when no repair ran."""
    from ..repair.show import diff_lines, summary as repair_summary
    color = _color(sys.stdout) if color is None else color
    import click
    out = []
    for d in (result or {}).get("diagnoses") or []:
        r = d.get("repair") if isinstance(d, dict) else None
        if not r:
            continue
        head = clean(f"  repair   {d.get('id')}: {repair_summary(r)}")
        out.append(click.style(head, fg="green" if r.get("verified") else "yellow") if color else head)
        for ln in diff_lines(r):
            ln = clean(ln)                 # the student's own lines: no raw escape bytes on a terminal
            fg = {"+": "green", "-": "red", "@": "cyan"}.get(ln[:1])
            out.append("     " + (click.style(ln, fg=fg) if color and fg else ln))
    text = "\n".join(out)
    return text if _utf8(sys.stdout) else text.translate(ASCII_FALLBACK)
