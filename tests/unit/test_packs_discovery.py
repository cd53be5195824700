"""Pack discovery (harness/packs/discover.py): the entry point group read, each pack loaded and validated, a broken
one named by its distribution and never in the way of the others; the registry (assignments.py) after it."""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from harness import assignments
from harness.packs import discover
from harness.packs.api import Assignment, Binding, Edition, Pack

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "packs" / "mtxdiag-pack-minicourse"
VALUE = "minicourse_pack.pack:PACK"


class _Dist:
    def __init__(self, name):
        self.name = name


class _EP:
    def __init__(self, name, value, dist):
        self.name, self.value, self.dist = name, value, _Dist(dist)


@pytest.fixture
def fixture_pack(monkeypatch):
    """The fixture pack importable, the entry points given by `declare([...])`, discovery's cache empty."""
    monkeypatch.syspath_prepend(str(FIXTURE))
    for name in [m for m in sys.modules if m.startswith("minicourse_pack")]:
        monkeypatch.delitem(sys.modules, name)
    discover.discover.cache_clear()
    eps: list = []
    import importlib.metadata
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: [e for e in eps if group == discover.GROUP])
    monkeypatch.setattr(discover, "any_declared", lambda: True)
    yield eps.extend
    discover.discover.cache_clear()


def test_an_installed_pack_is_found_and_usable(fixture_pack):
    fixture_pack([_EP("minicourse", VALUE, "mtxdiag-pack-minicourse")])
    found = [f for f in discover.discover(("reversal",)) if f.distribution != discover.HOME]   # not the built-ins
    assert [(f.name, f.distribution, f.error) for f in found] == [("minicourse", "mtxdiag-pack-minicourse", "")]
    assert isinstance(found[0].pack, Pack) and found[0].pack.binding("Attention").mask.blocks == "true"


def test_a_broken_pack_is_named_by_its_distribution_and_hides_no_other(fixture_pack):
    fixture_pack([_EP("gone", "no_such_pack_module.pack:PACK", "mtxdiag-pack-gone"),
                  _EP("minicourse", VALUE, "mtxdiag-pack-minicourse"),
                  _EP("notapack", "minicourse_pack.pack:ASSIGNMENT", "mtxdiag-pack-odd")])
    found = {f.name: f for f in discover.discover(())}
    assert found["minicourse"].pack is not None and not found["minicourse"].error
    assert found["gone"].pack is None
    assert "mtxdiag-pack-gone" in found["gone"].error and "ModuleNotFoundError" in found["gone"].error
    assert "mtxdiag-pack-odd" in found["notapack"].error and "not a harness.packs.api.Pack" in found["notapack"].error


def test_a_name_declared_twice_is_used_once(fixture_pack, monkeypatch):
    """The checkout's built-in list and mtxdiag's own (maybe stale) entry points are one pack; another
    distribution's pack of the same name is an error that names both."""
    monkeypatch.setattr(discover, "BUILT_IN", (("minicourse", VALUE),))
    fixture_pack([_EP("minicourse", VALUE, discover.HOME), _EP("minicourse", VALUE, "someone-else")])
    found = discover.discover(())
    assert [f.distribution for f in found] == [discover.HOME, "someone-else"]
    assert found[0].pack is not None
    assert found[1].pack is None and "taken by mtxdiag" in found[1].error and "someone-else" in found[1].error


def _pack(**kw) -> Pack:
    a = Assignment(name="course", title="t", handed_in="h", required=("A",))
    base = dict(assignment=a, files=("course/a.py",), editions=(Edition("2025", student=("A",)),),
                bindings=(Binding("attention", "A", "course.a:A"),))
    base.update(kw)
    return Pack(**base)


def test_the_quick_look_finds_a_distribution_that_declares_the_group(tmp_path, monkeypatch):
    info = tmp_path / "somepack-1.0.dist-info"
    info.mkdir()
    (info / "entry_points.txt").write_text("[console_scripts]\nx = y:z\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert not discover.any_declared()
    (info / "entry_points.txt").write_text("[mtxdiag.packs]\nsomepack = somepack.pack:PACK\n")
    assert discover.any_declared()


def test_a_sound_pack_has_no_problems():
    assert discover.problems(_pack(), "course") == []


@pytest.mark.parametrize("pack, name, words", [
    (_pack(), "other", "its entry point 'other'"),
    (_pack(), "reversal", None),
    (_pack(files=()), "course", "no `files`"),
    (_pack(files=("../a.py",)), "course", "relative paths"),
    (_pack(bindings=()), "course", "binds nothing"),
    (_pack(bindings=(Binding("attention", "A", "c:A"), Binding("layer", "A", "c:B"))), "course", "bound twice"),
    (_pack(bindings=(Binding("attention", "A", "c:A", editions=("2030",)),)), "course", "2030"),
    (_pack(editions=(Edition("2025", student=("Z",)),)), "course", "does not bind: Z"),
    (_pack(probes="not a target"), "course", "`probes` must be"),
    (_pack(assignment=replace(_pack().assignment, pack="x:Y")), "course", "discovery sets"),
    (_pack(assignment=replace(_pack().assignment, is_repository=True)), "course", "is_repository"),
])
def test_each_contradiction_is_said(pack, name, words):
    if name == "reversal":      # a built-in name is reserved
        pack = _pack(assignment=replace(pack.assignment, name="reversal"))
        words = "built into the harness"
    wrong = discover.problems(pack, name, ("reversal", "auto"))
    assert any(words in w for w in wrong), wrong


def test_the_registry_puts_packs_after_the_built_in_assignments():
    assert assignments.ALL[:3] == assignments.BUILT_IN
    assert all(a.pack for a in assignments.ALL)         # every assignment is a pack, the built-in ones too
    assert set(assignments.SINGLE_FILE) <= {a.name for a in assignments.BUILT_IN}
    assert set(assignments.PACKS) == {a.name for a in assignments.ALL if a.pack}
    assert assignments.CHOICES == (assignments.AUTO,) + assignments.NAMES
    assert assignments.pack_of(None) is None and assignments.folder_pack_of(None) is None
    # one way, three kinds of submission: a file, a repository, an assignment folder
    assert assignments.pack_of("reversal").is_file and assignments.pack_of("block").is_file
    assert assignments.pack_of("lm").is_repository and assignments.REPOSITORY == ("lm",)
    assert assignments.folder_pack_of("lm") is None and assignments.folder_pack_of("reversal") is None
    assert assignments.folder_pack_of("cs231n") is assignments.pack_of("cs231n")
    assert assignments.DEFAULT is assignments.REVERSAL and assignments.REPOSITORY_MARKER == "tests/adapters.py"


def test_check_says_what_is_wrong_with_a_broken_pack_and_goes_on(monkeypatch, tmp_path, capsys):
    from harness.cli import main as cli
    monkeypatch.setattr(cli, "BROKEN", ("pack 'gone' of mtxdiag-pack-gone cannot be loaded from x:PACK: boom",))
    f = tmp_path / "model.py"
    f.write_text("class TransformerBlock: pass\n")
    assert cli._usable(f, "auto") == "auto"
    assert "mtxdiag: pack 'gone' of mtxdiag-pack-gone cannot be loaded" in capsys.readouterr().err
