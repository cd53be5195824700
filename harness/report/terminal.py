"""The terminal summary: verdict, top causes with one line of evidence and file:line."""
from __future__ import annotations

import os
import sys
import time


def _color(stream) -> bool:
    return hasattr(stream, "isatty") and stream.isatty() and "NO_COLOR" not in os.environ


class Progress:
    """One line on stderr that names the probe being run, so nobody stares at a silent prompt."""

    def __init__(self, stream=sys.stderr):
        self.stream, self.t0, self.tty = stream, time.monotonic(), _color(stream)

    def phase(self, name):
        msg = f"mtxdiag: {time.monotonic() - self.t0:5.1f}s  {name}"
        if self.tty:
            self.stream.write("\r\x1b[K" + msg)
        else:
            self.stream.write(msg + "\n")
        self.stream.flush()

    def done(self):
        if self.tty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def _where(loc):
    if not loc:
        return ""
    if loc.get("cell"):
        return f"{loc['file']} cell {loc['cell']} line {loc.get('cell_line')}"
    return f"{loc['file']}:{loc['line']}"


def summary(result: dict, json_path=None, html_path=None, color: bool | None = None) -> str:
    color = _color(sys.stdout) if color is None else color
    def st(text, fg=None, bold=False):
        if not color:
            return text
        import click
        return click.style(text, fg=fg, bold=bold)
    v = result["verdict"]
    head = {"clean": st("CLEAN", "green", True), "problems": st("PROBLEMS", "red", True),
            "error": st("ERROR", "yellow", True)}[v]
    lines = [f"{head}  {result['submission']}  (assignment {result.get('assignment')}, "
             f"{result['timings'].get('total_s', 0):.1f}s)"]
    for i, d in enumerate(result["diagnoses"][:5], start=1):
        lines.append(f"  {i}. {st(d['id'], 'cyan', True)} ({d['confidence']:.2f})  {d['title']}")
        if d["evidence"]:
            lines.append(f"     evidence: {d['evidence'][0][:150]}")
        where = _where(d.get("location"))
        if where:
            lines.append(f"     at: {where}")
        lines.append(f"     fix: {d['fix'][:150]}")
    if len(result["diagnoses"]) > 5:
        lines.append(f"  ... and {len(result['diagnoses']) - 5} more in the report")
    counts = {}
    for c in result["checks"]:
        counts[c["status"]] = counts.get(c["status"], 0) + 1
    if counts:
        lines.append("  checks: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    if json_path:
        lines.append(f"  json:   {json_path}")
    if html_path:
        lines.append(f"  report: {html_path}")
    return "\n".join(lines)
