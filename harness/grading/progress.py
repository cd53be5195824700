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
    """What a run is doing, from its first second, on stderr.

    `announce` prints a plain line (what was found, how many workers start). On a terminal one status line is
    redrawn every half second by a ticker thread: done/total, each running submission with its seconds, failures
    and an ETA from the measured times of this run's checks (running ones counted by what they have left).
    Piped: a line when a check starts and when it ends, and a plain status line every `every_s` seconds
    (MTXDIAG_PROGRESS_EVERY_S, default 15) while nothing else was printed. Names are stripped of control
    characters (a folder name reaches the terminal)."""

    def __init__(self, total: int = 0, to_grade: int = 0, stream=None, enabled: bool = True, jobs: int = 1,
                 every_s: float | None = None):
        import os
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.total, self.to_grade, self.enabled, self.jobs = total, to_grade, enabled, max(1, jobs)
        self.done, self.graded, self.failed, self.t0 = 0, 0, 0, time.monotonic()
        self.running: dict[str, float] = {}
        self.seconds: list[float] = []
        self.every_s = every_s if every_s is not None else float(os.environ.get("MTXDIAG_PROGRESS_EVERY_S", 15))
        self._lock = threading.RLock()
        self._last = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- text
    def eta_s(self) -> float | None:
        """Seconds left: the mean measured check time for each not yet started, what is left of it for each
        running, over the workers; None before the first check ends (nothing measured yet)."""
        if not self.seconds:
            return None
        mean, now = sum(self.seconds) / len(self.seconds), time.monotonic()
        waiting = max(self.to_grade - self.graded - len(self.running), 0)
        left = waiting * mean + sum(max(mean - (now - t), 1.0) for t in self.running.values())
        return left / min(self.jobs, max(waiting + len(self.running), 1))

    def eta(self) -> str:
        if self.to_grade - self.graded <= 0:
            return "0s"
        s = self.eta_s()
        if s is None:
            return "?"
        return f"{int(s // 60)}m{int(s % 60):02d}s" if s >= 60 else f"{s:.0f}s"

    def status(self) -> str:
        from ..report.terminal import clean
        now = time.monotonic()
        run = ", ".join(f"{clean(n)[:30]} {now - t:.0f}s" for n, t in sorted(self.running.items(),
                                                                           key=lambda kv: kv[1])[:4])
        more = f" +{len(self.running) - 4}" if len(self.running) > 4 else ""
        eta = self.eta()
        return (f"mtxdiag grade: {self.done}/{self.total} done, {len(self.running)} running"
                + (f" ({run}{more})" if run else "") + f", {self.failed} failed, "
                + ("ETA after the first result" if eta == "?" else f"ETA {eta}")
                + f", {now - self.t0:.0f}s elapsed")

    def _write(self, line: str, keep: bool):
        """A line that stays (keep) or the redrawn status line (terminal only)."""
        if not self.enabled:
            return
        with self._lock:
            try:
                if self.tty:
                    import shutil
                    width = shutil.get_terminal_size((100, 24)).columns
                    self.stream.write("\r\x1b[K" + (line + "\n" if keep else line[: max(width - 1, 20)]))
                else:
                    self.stream.write(line + "\n")
                self.stream.flush()
                self._last = time.monotonic()
            except (OSError, ValueError):
                pass

    # -- events
    def announce(self, text: str):
        from ..report.terminal import clean
        self._write("mtxdiag grade: " + clean(text), keep=True)
        self._start()

    def set_totals(self, total: int, to_grade: int, jobs: int | None = None):
        with self._lock:
            self.total, self.to_grade = total, to_grade
            self.done = total - to_grade
            if jobs:
                self.jobs = max(1, jobs)

    def started(self, student: str):
        from ..report.terminal import clean
        with self._lock:
            self.running[student] = time.monotonic()
        if not self.tty:
            self._write(f"mtxdiag grade: running {clean(student)}", keep=True)

    def update(self, student: str, what: str, graded: bool, failed: bool, seconds: float | None = None):
        from ..report.terminal import clean
        with self._lock:
            t = self.running.pop(student, None)
            if graded:
                took = seconds if seconds is not None else (time.monotonic() - t if t is not None else None)
                if took is not None:
                    self.seconds.append(float(took))
            self.done += 1
            self.graded += graded
            self.failed += failed
        self._write(f"mtxdiag grade: done {clean(student)}: {clean(what)}  [{self.done}/{self.total}, ETA "
                    f"{self.eta()}]", keep=True)
        if self.tty:
            self._write(self.status(), keep=False)

    # -- the ticker
    def _start(self):
        if self.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._tick, name="mtxdiag-grade-progress", daemon=True)
            self._thread.start()

    def _tick(self):
        while not self._stop.wait(0.5):
            if self.tty:
                self._write(self.status(), keep=False)
            elif time.monotonic() - self._last >= self.every_s:
                self._write(self.status(), keep=True)

    def close(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self.enabled and self.tty:
            self._write(self.status(), keep=True)


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
