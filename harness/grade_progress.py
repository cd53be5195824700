"""Grading, part 4: what a run tells its user while it goes (progress lines, the log) and when it ends."""
from __future__ import annotations

import datetime as _dt
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path


class _Log:
    """grading.log: appended, one line per event, flushed at once (an interrupted run keeps its lines)."""

    def __init__(self, path: Path | None, echo=None):
        self.f = open(path, "a", encoding="utf-8") if path else None
        self.lock = threading.Lock()
        self.echo = echo

    def __call__(self, msg: str):
        line = f"{_dt.datetime.now().isoformat(timespec='seconds')} {msg}"
        with self.lock:
            if self.f:
                self.f.write(line + "\n")
                self.f.flush()

    def close(self):
        if self.f:
            self.f.close()


class Progress:
    """done/total, failures and ETA on stderr: a \\r line on a terminal, a line per submission otherwise."""

    def __init__(self, total: int, to_grade: int, stream=None, enabled: bool = True):
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.total, self.to_grade, self.enabled = total, to_grade, enabled
        self.done, self.graded, self.failed, self.t0 = 0, 0, 0, time.monotonic()

    def eta(self) -> str:
        left = self.to_grade - self.graded
        if self.graded == 0 or left <= 0:
            return "?" if left > 0 else "0s"
        s = (time.monotonic() - self.t0) / self.graded * left
        return f"{int(s // 60)}m{int(s % 60):02d}s" if s >= 60 else f"{s:.0f}s"

    def update(self, student: str, what: str, graded: bool, failed: bool):
        self.done += 1
        self.graded += graded
        self.failed += failed
        if not self.enabled:
            return
        msg = (f"mtxdiag grade: {self.done}/{self.total} done, {self.failed} failed, "
               f"ETA {self.eta()}  ({student}: {what})")
        if self.tty:
            self.stream.write("\r\x1b[K" + msg[:200])
        else:
            self.stream.write(msg + "\n")
        self.stream.flush()

    def close(self):
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()


@dataclass
class RunSummary:
    total: int = 0
    graded: list = field(default_factory=list)        # ids checked in this run
    reused: list = field(default_factory=list)        # ids whose cached result was reused
    rescored: list = field(default_factory=list)      # cached ids whose score changed (new rubric)
    problems: list = field(default_factory=list)      # ids with nothing to grade (no or several files)
    grader_faults: list = field(default_factory=list)
    report_errors: list = field(default_factory=list)
    interrupted: bool = False
    seconds: float = 0.0
    rows: list = field(default_factory=list)

    def text(self) -> str:
        s = (f"{self.total} submissions: {len(self.graded)} graded, {len(self.reused)} reused from earlier runs"
             + (f" ({len(self.rescored)} rescored)" if self.rescored else "")
             + (f", {len(self.problems)} without a gradable file" if self.problems else "")
             + (f", {len(self.grader_faults)} grader faults (rerun to retry)" if self.grader_faults else "")
             + f" in {self.seconds:.1f} s")
        return s + (" (interrupted)" if self.interrupted else "")
