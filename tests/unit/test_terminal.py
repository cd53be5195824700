"""The terminal summary and progress line: colour only on a terminal, never piped, never with NO_COLOR."""
from __future__ import annotations

import io
import json
import re
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from harness.report import terminal
from harness.report.terminal import Progress, summary

ESC = "\x1b"
ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "tests" / "fixtures" / "correct" / "reversal_notebook_style.ipynb"


class TTY(io.StringIO):
    """A stream that says it is a terminal."""
    encoding = "utf-8"

    def isatty(self):
        return True


def _diag(i, location=None):
    return {"id": f"cause-{i}", "title": f"Cause number {i} " + "with a long title " * 3, "confidence": 0.9 - i / 100,
            "evidence": [f"check-{i}: measured {i}.5, expected < 0.75 " + "and more words " * 20],
            "fix": "Do the right thing " * 15, "why": "because", "location": location}


def result(n=2, location=None, verdict="problems", **over):
    r = {"submission": "student.py", "assignment": "reversal", "quick": False, "verdict": verdict,
         "diagnoses": [_diag(i, location) for i in range(1, n + 1)],
         "checks": [{"id": "a", "status": "pass"}, {"id": "b", "status": "fail"}, {"id": "c", "status": "skip"}],
         "timings": {"total_s": 12.34}, "error": None}
    r.update(over)
    return r


def test_piped_has_no_escape_codes():
    text = summary(result(), json_path="reports/x.json", html_path="reports/x.html", color=False)
    assert ESC not in text
    assert "PROBLEMS" in text and "cause-1" in text and "reports/x.html" in text and "reports/x.json" in text


def test_color_has_escape_codes():
    text = summary(result(), color=True)
    assert ESC + "[" in text
    assert re.sub(r"\x1b\[[0-9;]*m", "", text) == summary(result(), color=False)


def test_no_color_env_is_respected(monkeypatch):
    monkeypatch.setattr(sys, "stdout", TTY())
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TERM", raising=False)
    assert ESC in summary(result())                         # a terminal: colour by default
    monkeypatch.setenv("NO_COLOR", "1")
    assert ESC not in summary(result())
    monkeypatch.setenv("NO_COLOR", "")                       # present at all: no colour (no-color.org)
    assert ESC not in summary(result())


def test_not_a_tty_means_no_color(monkeypatch):
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert ESC not in summary(result())


def test_wraps_at_the_width_and_keeps_every_word():
    """Issue 27: the terminal wraps instead of cutting; an 80-column terminal shows the whole fix."""
    d = result(n=20, location={"file": "student.py", "line": 3})
    for width in (80, 100):
        text = summary(d, html_path="r.html", json_path="r.json", color=False, width=width)
        lines = text.splitlines()
        assert all(len(l) <= width for l in lines[1:]), max(lines[1:], key=len)
        assert "…" not in text.split("more:")[0]          # only the list of further causes is elided
        flat = " ".join(text.split())
        assert " ".join(d["diagnoses"][0]["fix"].split()) in flat
        assert " ".join(d["diagnoses"][0]["evidence"][0].split()) in flat
        assert "+ 17 more" in text
        assert text.count("evidence ") == 3


def test_piped_keeps_whole_lines_and_respects_columns(monkeypatch):
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    monkeypatch.delenv("COLUMNS", raising=False)
    d = result(n=1, location={"file": "student.py", "line": 3})
    text = summary(d, color=False)
    assert any(l.strip() == "fix      " + " ".join(d["diagnoses"][0]["fix"].split()) for l in text.splitlines())
    monkeypatch.setenv("COLUMNS", "80")
    assert max(len(l) for l in summary(d, color=False).splitlines()[1:]) <= 80


def test_control_characters_never_reach_the_terminal(tmp_path, monkeypatch):
    """Issue 26: a student's line with raw escape bytes, a forged title or fix, prints without them."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "student.py").write_text("x = 1\ny = 2  # \x1b[2J\x1b[H\x1b[42m CLEAN \x1b[0m\r\x08\x9b\u202e\n")
    d = result(n=1, location={"file": "student.py", "line": 2})
    d["diagnoses"][0].update(title="t\x1b]0;owned\x07", fix="f\x1b[1A\r", evidence=["e\x00\x7f\x1b[31m"])
    d["submission"] = "s\x1b[2J.py"
    for color in (False, True):
        text = summary(d, color=color, html_path="r\x1b[5m.html", json_path="j\x9b.json", width=100)
        plain = re.sub(r"\x1b\[[0-9;]*m", "", text) if color else text
        assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e]", plain), repr(plain)
    stream = io.StringIO()
    p = Progress(stream)
    p.phase("load\x1b[2J")
    p.note("why\x1b[H\r")
    p.done()
    assert "\x1b" not in stream.getvalue() and "\r" not in stream.getvalue()


def test_location_file_line_and_notebook_cell():
    text = summary(result(n=1, location={"file": "student.py", "line": 42}), color=False)
    assert "student.py:42" in text
    nb = {"file": "lesson.ipynb", "line": 118, "cell": 8, "cell_line": 38}
    text = summary(result(n=1, location=nb), color=False)
    # not readable here: the number says what it counts
    assert "lesson.ipynb cell 8 (counting markdown cells) line 38" in text and ":118" not in text


def test_source_line_is_quoted(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)          # a relative path: the room left for the code does not depend on tmp_path
    (tmp_path / "student.py").write_text("x = 1\nscores = Q @ K.transpose(-2, -1)\n")
    text = summary(result(n=1, location={"file": "student.py", "line": 2}), color=False, width=120)
    assert "student.py:2  │ scores = Q @ K.transpose(-2, -1)" in text


def test_source_line_from_a_notebook_cell():
    nb = json.loads(NOTEBOOK.read_text())
    n, cell = next((i, c) for i, c in enumerate(nb["cells"], start=1)
                   if c["cell_type"] == "code" and "def target_mask" in "".join(c["source"]))
    lines = "".join(cell["source"]).splitlines()
    k = next(i for i, l in enumerate(lines, start=1) if "tril" in l)
    loc = {"file": str(NOTEBOOK), "line": 1, "cell": n, "cell_line": k}
    assert "tril" in terminal.source_line(loc)


def test_clean_and_error_and_quick():
    text = summary(result(n=0, verdict="clean", quick=True), color=False)
    assert "CLEAN" in text and "No problems found" in text and "quick" in text
    text = summary(result(n=1, verdict="error", error={"kind": "timeout", "reason": "ran past 180 s"}), color=False)
    assert "ERROR" in text and "ran past 180 s" in text


def test_malformed_result_does_not_crash():
    for r in ({}, {"verdict": "problems", "diagnoses": [None, {"id": 3}], "checks": "x", "timings": None}):
        assert isinstance(summary(r, color=False), str)


# -- progress ----------------------------------------------------------------------------------------

def test_progress_piped_is_plain_lines():
    s = io.StringIO()
    p = Progress(s)
    p.phase("load")
    p.phase("shapes")
    p.done()
    out = s.getvalue()
    assert ESC not in out and "\r" not in out
    assert [l.split()[-1] for l in out.splitlines()] == ["load", "shapes"]


def test_progress_on_a_tty_spins_and_clears(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TERM", raising=False)
    s = TTY()
    p = Progress(s, interval=0.01)
    p.phase("brief-training")
    time.sleep(0.15)
    p.done()
    out = s.getvalue()
    assert "\r\x1b[K" in out and "brief-training" in out
    assert len(set(re.findall("[" + Progress.FRAMES_UTF8 + "]", out))) > 1      # it animated
    assert "\x1b[36m" in out                                                     # coloured spinner
    assert out.endswith("\r\x1b[K")                                              # the line is cleared
    n = len(out)
    time.sleep(0.05)
    p.phase("late")                                                              # after done: nothing
    assert len(s.getvalue()) == n
    assert p._thread is not None and not p._thread.is_alive()


def test_progress_tty_with_no_color(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    s = TTY()
    p = Progress(s)
    p.phase("load")
    p.done()
    out = s.getvalue()
    assert "load" in out and not re.search(r"\x1b\[[0-9;]*m", out)               # no colour; erasing is fine


# -- through the CLI --------------------------------------------------------------------------------

def test_cli_check_output_is_plain_when_piped(tmp_path, monkeypatch):
    from harness.cli import main as cli
    sub = tmp_path / "student.py"
    sub.write_text("x = 1\n")
    r = result(n=1, location={"file": str(sub), "line": 1}, submission=str(sub))
    r.update(schema=1, checks=[], skipped_code=[], stdout="", stderr="", artifacts={})
    monkeypatch.setattr(cli, "check_file", lambda *a, **k: (k["on_event"]("load"), r)[1])
    out_html = tmp_path / "out" / "r.html"
    res = CliRunner().invoke(cli.main, ["check", str(sub), "--json", str(tmp_path / "r.json"), "--html",
                                        str(out_html)])
    assert res.exit_code == 1, res.output
    assert ESC not in res.output
    assert "cause-1" in res.output and str(out_html) in res.output
    assert out_html.exists() and "Cause number 1" in out_html.read_text(encoding="utf-8")


def test_lm_checklist_notes_cannot_drive_the_terminal():
    from harness.report.lm_checklist import terminal_lines
    result = {"assignment": "lm", "checks": [
        {"id": "lm-linear", "status": "error", "detail": "x\x1b[2J", "data": {"kind": "error"}},
        {"id": "lm-imports", "status": "info", "data": {"import_failures": [{"missing_module": "m\x1b[H\x07"}]}}]}
    text = "\n".join(terminal_lines(result, 100, lambda t, *a, **k: t))
    assert "\x1b" not in text and "\x07" not in text


def test_quoted_code_keeps_its_spacing_when_wrapped(tmp_path, monkeypatch):
    """At COLUMNS=80 a code line too wide to sit beside its place gets its own lines: cut, never reflowed."""
    monkeypatch.chdir(tmp_path)
    code = ("attn_scores    = torch.matmul(query,   key.transpose(-2, -1))   /   math.sqrt(d_k)"
            "      # (batch, heads,  q,  k)   scaled")
    (tmp_path / "student.py").write_text("x = 1\n        " + code + "\n")
    monkeypatch.setenv("COLUMNS", "80")
    text = summary(result(n=1, location={"file": "student.py", "line": 2}), color=False,
                   width=terminal.width_for(io.StringIO()))
    quoted = [ln.split("│ ", 1)[1] for ln in text.splitlines() if "│ " in ln and "student.py" not in ln]
    assert len(quoted) >= 2 and all(len(ln) <= 80 for ln in text.splitlines())
    assert "".join(quoted) == code                          # every inner space kept, nothing lost or added
    assert "query,   key" in "".join(quoted)


def test_the_summary_says_what_limited_the_run():
    """The result's `limits` (isolation/enforce.py): which mechanism was active, and its limits; none, no line."""
    assert "limits" not in summary(result(), color=False, width=100)
    fallback = {"enforced_by": "rlimits", "memory_mb": 2048, "disk_mb": 256, "measured_outside": True, "why": "x"}
    line = next(ln for ln in summary(result(limits=fallback), color=False, width=100).splitlines() if "limits" in ln)
    assert line.strip() == "limits   enforced by rlimits, measured from outside (2048 MB memory, 256 MB disk)", line
    own = dict(fallback, enforced_by="cgroup-v2", pids=256, cpus=2)
    text = summary(result(limits=own), color=False, width=120)
    assert "enforced by a cgroup v2 of its own (2048 MB memory, 256 MB disk, 256 tasks, 2 CPUs)" in text, text


def test_the_html_report_says_what_limited_the_run():
    from harness.report import html
    lim = {"enforced_by": "rlimits", "memory_mb": 2048, "disk_mb": 256, "measured_outside": True}
    page = html.render(result(verdict="problems", limits=lim))
    assert "limits enforced by rlimits, measured from outside (2048 MB memory, 256 MB disk)" in page
    assert "limits enforced" not in html.render(result(verdict="problems"))
