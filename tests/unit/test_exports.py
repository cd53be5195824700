"""A Gradescope or Canvas bulk download graded as the class folder it is (harness/grading/exports.py)."""
from __future__ import annotations

import pytest

from harness.grading.discovery import GradeError, discover
from harness.grading.exports import safe_id

META = """submission_101:
  :submitters:
  - :name: Ada Lovelace
    :sid: 'S-1815'
    :email: ada@example.edu
  :created_at: 2026-11-30 12:00:00.000000000 -08:00
  :score: 0.0
submission_102:
  :submitters:
  - :name: Alan Turing
    :sid: ''
    :email: alan@example.edu
  - :name: Grace Hopper
    :sid: '1906'
    :email: grace@example.edu
submission_103:
  :submitters:
  - :name: "../../etc"
    :sid: ''
    :email: ''
"""


def test_a_gradescope_export_is_read_by_its_metadata(tmp_path):
    (tmp_path / "submission_metadata.yml").write_text(META)
    for n in ("101", "102", "103"):
        (tmp_path / f"submission_{n}").mkdir()
    (tmp_path / "submission_101" / "model.py").write_text("x = 1\n")
    (tmp_path / "submission_102" / "notebook.ipynb").write_text("{}")
    (tmp_path / "submission_103" / "a.py").write_text("")
    (tmp_path / "submission_103" / "b.py").write_text("")
    subs, ignored = discover(tmp_path)
    by = {s.student: s for s in subs}
    assert set(by) == {"S-1815", "alan+1906", "etc"}, by
    assert by["S-1815"].path.name == "model.py" and by["alan+1906"].path.name == "notebook.ipynb"
    assert by["etc"].path is None and "2 .py/.ipynb files" in by["etc"].problem
    assert ignored == []


def test_unreadable_gradescope_metadata_is_a_clear_error(tmp_path):
    (tmp_path / "submission_metadata.yml").write_text("submission_1: [unclosed\n")
    with pytest.raises(GradeError, match="Gradescope export"):
        discover(tmp_path)


def test_a_canvas_download_is_read_by_its_file_names(tmp_path):
    for name in ("lovelaceada_1815_900_model.py", "turingalan_late_1912_901_transformer-1.py",
                 "hoppergrace_1906_902_a.py", "hoppergrace_1906_903_b.ipynb"):
        (tmp_path / name).write_text("x = 1\n")
    (tmp_path / "readme.txt").write_text("not a submission")
    subs, _ = discover(tmp_path)
    by = {s.student: s for s in subs}
    assert set(by) == {"lovelaceada_1815", "turingalan_1912", "hoppergrace_1906"}
    assert by["turingalan_1912"].path.name == "turingalan_late_1912_901_transformer-1.py"
    assert by["hoppergrace_1906"].path is None and "exactly one" in by["hoppergrace_1906"].problem


def test_a_plain_folder_is_not_taken_for_an_export(tmp_path):
    (tmp_path / "alice.py").write_text("x = 1\n")
    (tmp_path / "bob_2_3_model.py").write_text("x = 1\n")     # one Canvas-like name does not make an export
    subs, _ = discover(tmp_path)
    assert {s.student for s in subs} == {"alice", "bob_2_3_model"}


def test_ids_from_metadata_are_safe_folder_names():
    assert safe_id("../../x y") == "x_y" and safe_id("") == "student" and safe_id(".hidden") == "hidden"
    assert len(safe_id("a" * 500)) == 80
