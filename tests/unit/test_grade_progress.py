"""`grade` says what it does from its first second (issue 27 item 6): found, workers, each running and done, an
ETA from measured times, a plain periodic line when piped; names stripped of control characters."""
from __future__ import annotations

import io
import time

from harness.grading.progress import Progress


def test_piped_lines_from_the_first_event_with_a_measured_eta():
    out = io.StringIO()
    p = Progress(stream=out, jobs=2, every_s=1000)
    p.announce("looking for submissions in class/")
    assert out.getvalue().splitlines() == ["mtxdiag grade: looking for submissions in class/"]
    p.set_totals(6, 6)
    p.started("alice")
    p.started("bob")
    assert "running alice" in out.getvalue() and "running bob" in out.getvalue()
    assert p.eta() == "?"                               # nothing measured: no invented ETA
    p.update("alice", "clean", graded=True, failed=False, seconds=10.0)
    # 4 waiting x 10 s + bob's remaining (>= 1 s) over 2 workers: 20.5-25 s
    assert 20.0 <= p.eta_s() <= 25.0, p.eta_s()
    assert "done alice: clean  [1/6, ETA" in out.getvalue()
    p.close()


def test_piped_periodic_status_line_while_nothing_else_happens():
    out = io.StringIO()
    p = Progress(stream=out, jobs=1, every_s=0.3)
    p.announce("found 3 submissions")
    p.set_totals(3, 3)
    p.started("carol")
    time.sleep(1.2)
    p.close()
    status = [l for l in out.getvalue().splitlines() if "running (carol" in l]
    assert status and "0/3 done" in status[0] and "ETA after the first result" in status[0]


def test_names_cannot_drive_the_terminal():
    out = io.StringIO()
    p = Progress(stream=out, every_s=1000)
    p.set_totals(1, 1)
    p.started("eve\x1b[2J\x1b[H")
    p.update("eve\x1b[2J\x1b[H", "clean\r\x1b[32m CLEAN", graded=True, failed=False, seconds=1.0)
    p.close()
    assert "\x1b" not in out.getvalue() and "\r" not in out.getvalue()
