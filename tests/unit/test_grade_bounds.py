"""Discovery and copying are bounded, iterative and per student (issue 26.5): a folder 1,100 levels deep is
that student's problem row and the gradebook is written; a repository of 6,000 modules keeps
tests/adapters.py and the model it imports, and says what it left out. In-process (a fake checker)."""
from __future__ import annotations

import os
from pathlib import Path

from harness.isolation import repo_copy
from harness import tree_walk
from harness.grading.grade import Grader, Options
from harness.grading.discovery import _read, discover


def deep_folder(root: Path, levels: int, leaf: str = "model.py") -> Path:
    """root/d/d/.../d (levels deep) with `leaf` at the bottom, made without recursion (os.makedirs recurses)."""
    root.mkdir(parents=True, exist_ok=True)
    path = root
    for _ in range(levels):
        path = path / "d"
        path.mkdir()
    (path / leaf).write_text("clean\n")
    return path


def remove_deep(root: Path) -> None:
    """Bottom up, iteratively (shutil.rmtree recurses once per level)."""
    for dirpath, dirs, files in _walk_bottom_up(root):
        for f in files:
            os.unlink(os.path.join(dirpath, f))
        os.rmdir(dirpath)


def _walk_bottom_up(root: Path):
    order, todo = [], [str(root)]
    while todo:
        d = todo.pop()
        entries = list(os.scandir(d))
        order.append((d, [e.name for e in entries if e.is_dir(follow_symlinks=False)],
                      [e.name for e in entries if not e.is_dir(follow_symlinks=False)]))
        todo += [e.path for e in entries if e.is_dir(follow_symlinks=False)]
    return reversed(order)


def big_repo(root: Path, modules: int) -> Path:
    """A repository whose package has `modules` modules besides the model the adapters import; the filler
    modules sort before tests/ (the old copy took them first and dropped tests/adapters.py)."""
    pkg = root / "cs336_basics"
    (pkg / "aaa_filler").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "aaa_filler" / "__init__.py").write_text("")
    for i in range(modules):
        (pkg / "aaa_filler" / f"m{i:05d}.py").write_text(f"V = {i}\n")
    (pkg / "zz_model.py").write_text("from .zz_layers import Linear\n")
    (pkg / "zz_layers.py").write_text("class Linear: pass\n")
    (root / "tests").mkdir()
    (root / "tests" / "__init__.py").write_text("")
    (root / "tests" / "adapters.py").write_text("from cs336_basics.zz_model import Linear\n")
    return root


def test_walk_is_iterative_and_reports_what_is_too_deep(tmp_path):
    deep_folder(tmp_path / "a", 1100)
    try:
        w = tree_walk.walk(tmp_path / "a", keep_dir=lambda n, d: True, keep_file=lambda n: n.endswith(".py"))
        assert w.files == [] and w.too_deep == 1
        assert any(f"more than {tree_walk.MAX_DEPTH} levels deep" in s for s in w.skipped)
        shallow = tree_walk.walk(tmp_path / "a", keep_dir=lambda n, d: True, keep_file=lambda n: True,
                                 max_depth=2000)
        assert len(shallow.files) == 1 and shallow.files[0][1] == 1100      # no RecursionError at any depth
    finally:
        remove_deep(tmp_path / "a")


def test_walk_stops_after_the_entry_limit_and_says_so(tmp_path):
    for i in range(30):
        (tmp_path / f"f{i:02d}.py").write_text("")
    w = tree_walk.walk(tmp_path, keep_dir=lambda n, d: True, keep_file=lambda n: True, max_entries=10)
    assert len(w.files) == 10 and w.truncated and "stopped after 10 entries" in w.skipped[0]


def test_a_folder_1100_levels_deep_is_one_students_row_and_the_gradebook_is_written(tmp_path):
    from test_grade import fake_check
    src, out = tmp_path / "subs", tmp_path / "out"
    src.mkdir()
    (src / "alice.py").write_text("clean\n")
    deep_folder(src / "deep", 1100)
    try:
        subs, _ = discover(src)
        by = {s.student: s for s in subs}
        assert by["alice"].path is not None and by["deep"].path is None
        assert "more than" in by["deep"].problem and "levels deep" in by["deep"].problem
        summary = Grader(src, out, options=Options(quick=True), checker=fake_check, progress=False).run()
        assert (out / "index.html").is_file() and (out / "grades.csv").is_file()
        rows = {r["student"]: r for r in summary.rows}
        assert rows["deep"]["verdict"] == "error" and rows["deep"]["fault"] == "student"
        assert "levels deep" in rows["deep"]["reason"] and rows["alice"]["score"] == 100
    finally:
        remove_deep(src / "deep")


def test_a_folder_that_cannot_be_searched_is_that_students_row(tmp_path, monkeypatch):
    from harness.grading import discovery as grade_discovery
    src = tmp_path / "subs"
    (src / "bob").mkdir(parents=True)
    (src / "bob" / "m.py").write_text("x = 1\n")
    (src / "carol.py").write_text("x = 1\n")
    real = grade_discovery._in_folder

    def boom(folder, student, shown):
        if student == "bob":
            raise RecursionError("maximum recursion depth exceeded")
        return real(folder, student, shown)
    monkeypatch.setattr(grade_discovery, "_in_folder", boom)
    subs, _ = discover(src)
    by = {s.student: s for s in subs}
    assert by["carol"].path is not None
    assert by["bob"].path is None and "RecursionError" in by["bob"].problem and by["bob"].fault == "student"


def test_a_repository_of_6000_modules_keeps_its_adapters_and_model(tmp_path):
    repo = big_repo(tmp_path / "alice", 6000)
    chosen = repo_copy.select(repo)
    rels = [rel.as_posix() for _, rel in chosen.files]
    assert rels[0] == "tests/adapters.py"
    assert {"cs336_basics/__init__.py", "cs336_basics/zz_model.py", "cs336_basics/zz_layers.py"} <= set(rels)
    assert len(rels) == repo_copy.REPO_MAX_FILES
    assert any("beyond the limits" in s and "3003" not in s for s in chosen.skipped)
    # and the copy the check makes holds them
    dst = tmp_path / "copy"
    left: list = []
    repo_copy.copy_repo(repo, dst, lambda p, shown: [], skipped=left)
    assert (dst / "tests" / "adapters.py").is_file() and (dst / "cs336_basics" / "zz_layers.py").is_file()
    assert left == chosen.skipped


def test_a_repository_is_one_submission_with_its_files_keyed(tmp_path):
    src = tmp_path / "subs"
    repo = big_repo(src / "alice" / "assignment1-basics", 3)
    (src / "alice" / "notes.py").write_text("")           # beside the repository: not the submission
    subs, _ = discover(src)
    [sub] = subs
    assert sub.student == "alice" and sub.repo and sub.path == repo
    _read(sub, Options())
    assert sub.problem is None and "tests/adapters.py" in sub.files and len(sub.files) == 9
    key = sub.key
    (repo / "cs336_basics" / "zz_layers.py").write_text("class Linear: x = 2\n")
    again = discover(src)[0][0]
    _read(again, Options())
    assert again.key != key                                   # a changed module is a changed submission
    other = discover(src)[0][0]
    _read(other, Options(assignment="reversal"))
    assert other.problem and "only assignment lm" in other.problem


def test_two_repositories_in_one_folder_is_a_problem_row(tmp_path):
    src = tmp_path / "subs"
    big_repo(src / "bob" / "v1", 1)
    big_repo(src / "bob" / "v2", 1)
    [sub] = discover(src)[0]
    assert sub.path is None and "2 repositories" in sub.problem
