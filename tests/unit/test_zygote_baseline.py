"""The warm worker's /tmp baseline (harness/isolation/forkcare.py, both warm workers'): what the sandbox placed in a scrubbed folder before any
run is kept, but only that: a file a run writes *inside* one of those folders is a leftover too, and a
writable mount among them is reported (files there would outlive the run)."""
from __future__ import annotations

from harness.isolation import forkcare as zygote


def test_baseline_keeps_only_what_was_there(tmp_path, monkeypatch):
    top = tmp_path / "tmp"
    (top / "dask-scratch" / "deep").mkdir(parents=True)
    (top / "dask-scratch" / "deep" / "mod.py").write_text("x = 1\n")
    monkeypatch.setattr(zygote, "_BASELINE", {str(top): zygote.inventory(str(top))})
    assert zygote.leftovers(str(top), slot="") == []
    # a run writes beside the sandbox's own files and at the top
    (top / "dask-scratch" / "deep" / "evil.pth").write_text("import os\n")
    (top / "note.txt").write_text("hi")
    (top / "dask-scratch" / "new").mkdir()
    left = zygote.leftovers(str(top), slot="")
    assert sorted(left) == sorted(str(p) for p in (top / "dask-scratch" / "deep" / "evil.pth",
                                                   top / "note.txt", top / "dask-scratch" / "new"))
    # the worker's own folder (bound from the host) is the grading process's to empty
    (top / "slot0").mkdir()
    assert str(top / "slot0") not in zygote.leftovers(str(top), slot=str(top / "slot0"))


def test_cleanup_removes_leftovers_inside_baseline_folders(tmp_path, monkeypatch):
    top = tmp_path / "tmp"
    (top / "kept").mkdir(parents=True)
    (top / "kept" / "a.py").write_text("")
    monkeypatch.setattr(zygote, "SCRUB", (str(top),))
    monkeypatch.setattr(zygote, "_BASELINE", {str(top): zygote.inventory(str(top))})
    monkeypatch.setattr(zygote, "kill_descendants", lambda: None)
    monkeypatch.setattr(zygote, "remove_sysv_ipc", lambda: None)
    (top / "kept" / "b.py").write_text("")
    assert zygote.clean_up(private=True) == []
    assert sorted(p.name for p in (top / "kept").iterdir()) == ["a.py"]


def test_a_writable_mount_in_the_baseline_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(zygote, "_BASELINE", {"/tmp": (frozenset(), frozenset({str(tmp_path)}))})
    found = zygote.writable_binds()
    assert len(found) == 1 and str(tmp_path) in found[0]
    # the worker's own folder is bound writable on purpose (the grading process empties it): not reported
    assert zygote.writable_binds(slot=str(tmp_path)) == []
    assert zygote.writable_binds(slot=str(tmp_path / "slot0")) == []
    monkeypatch.setattr(zygote, "_BASELINE", {"/tmp": (frozenset(), frozenset({str(tmp_path / "gone")}))})
    assert zygote.writable_binds() == []
