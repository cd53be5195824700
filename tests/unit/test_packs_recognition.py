"""A pack's submission folder recognised (packs/folder.py, assignments.detect_folder), copied in the pack's layout
(isolation/pack_copy.py), loaded in process (child/pack_loader.py: no child process) and planned into probes
(child/probes/packs.py) with a stand-in ROLE_PROBES: part B's role probes are not needed to test the plumbing."""
from __future__ import annotations

import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import assignments
from harness.packs.folder import edition_of, locate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "packs"
SUBMISSIONS = FIXTURES / "submissions"
sys.path.insert(0, str(FIXTURES / "mtxdiag-pack-minicourse"))
from minicourse_pack.pack import PACK  # noqa: E402

sys.path.remove(str(FIXTURES / "mtxdiag-pack-minicourse"))


def test_the_three_layouts_are_recognised(tmp_path):
    full = locate(PACK, SUBMISSIONS / "minicourse-correct")
    assert full and not full.flat and full.root == SUBMISSIONS / "minicourse-correct"
    flat = locate(PACK, SUBMISSIONS / "minicourse-flat")
    assert flat and flat.flat and flat.files == {"minicourse/attention.py": SUBMISSIONS / "minicourse-flat" / "attention.py"}
    nested = tmp_path / "repo" / "assignment2" / "minicourse"
    nested.mkdir(parents=True)
    (nested / "attention.py").write_text("x = 1\n")
    where = locate(PACK, tmp_path / "repo")
    assert where and where.root == tmp_path / "repo" / "assignment2" and not where.flat
    hidden = tmp_path / "hidden" / ".git" / "minicourse"                # a hidden folder is never looked into
    hidden.mkdir(parents=True)
    (hidden / "attention.py").write_text("x = 1\n")
    assert locate(PACK, tmp_path / "hidden") is None
    empty = tmp_path / "other"
    empty.mkdir()
    (empty / "model.py").write_text("")
    assert locate(PACK, empty) is None


def test_the_edition_is_picked_by_its_markers():
    texts = {"minicourse/attention.py": "class Attention:\n    def __init__(self, dim, heads, dropout=0.0): ..."}
    assert edition_of(PACK, texts.get).name == "2026"
    assert edition_of(PACK, {"minicourse/attention.py": "class Attention: ..."}.get).name == "2025"
    assert edition_of(PACK, {}.get).name == "2025"        # the unmarked one is the fallback


@pytest.fixture
def installed(monkeypatch):
    """The fixture pack as if installed: in the registry the rest of the harness reads."""
    a = assignments.replace(PACK.assignment, pack="minicourse_pack.pack:PACK")
    monkeypatch.setitem(assignments.PACKS, "minicourse", PACK)
    monkeypatch.setitem(assignments.BY_NAME, "minicourse", a)
    monkeypatch.setattr(assignments, "FOLDER", assignments.FOLDER + ("minicourse",))
    return a


def test_a_folder_is_detected_as_its_pack(installed, tmp_path):
    assert assignments.detect_folder(SUBMISSIONS / "minicourse-buggy") == "minicourse"
    assert assignments.for_folder("auto", SUBMISSIONS / "minicourse-flat") == "minicourse"
    assert assignments.for_folder("minicourse") == "minicourse"
    assert assignments.for_folder("reversal") is None
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "adapters.py").write_text("")
    assert assignments.detect_folder(tmp_path) == "lm"          # a repository is still lm's
    assert assignments.for_folder("auto") == "lm"               # without a folder: as before


def test_the_copy_has_the_packs_layout_and_scans_its_files(installed, tmp_path):
    from harness.isolation.pack_copy import copy_folder
    scanned = []

    def scan(path, shown):
        scanned.append(shown)
        return [{"id": "x", "location": {"file": "?", "line": 1}}]
    found = copy_folder("minicourse", SUBMISSIONS / "minicourse-flat", tmp_path / "flat", scan, "sub")
    assert (tmp_path / "flat" / "minicourse" / "attention.py").is_file()
    assert scanned == ["sub/minicourse/attention.py"] and found[0]["location"]["file"] == "sub/minicourse/attention.py"
    copy_folder("minicourse", SUBMISSIONS / "minicourse-correct", tmp_path / "full", scan, "sub")
    assert (tmp_path / "full" / "minicourse" / "attention.py").read_bytes() == \
        (SUBMISSIONS / "minicourse-correct" / "minicourse" / "attention.py").read_bytes()


@dataclass(frozen=True)
class RoleProbe:
    id: str
    fn: object
    cost: str


@dataclass
class RoleContext:
    binding: object
    student: object
    reference: object
    seed: int
    device: str
    quick: bool
    source: dict


@pytest.fixture
def loaded(installed, monkeypatch, tmp_path):
    """(loader's record, namespace module) of a submission loaded in process; the import hook removed after."""
    from harness.child import lm_loader, pack_loader
    monkeypatch.syspath_prepend(str(FIXTURES / "mtxdiag-pack-minicourse"))
    before = list(sys.meta_path)
    monkeypatch.setattr(lm_loader, "STATE", lm_loader._State())

    def load(name):
        for m in [m for m in sys.modules if m == "minicourse" or m.startswith("minicourse.")]:
            del sys.modules[m]
        source, module = pack_loader.load(str(SUBMISSIONS / name), Path(name).name, PACK, 30.0)
        return getattr(module, pack_loader.KEY), module, source
    yield load
    sys.meta_path[:] = before
    for m in [m for m in sys.modules if m == "minicourse" or m.startswith("minicourse.")]:
        del sys.modules[m]


def test_the_loader_finds_each_piece_absent_or_unwritten(loaded, tmp_path):
    rec, module, source = loaded("minicourse-correct")
    assert rec["edition"] == "2026" and set(rec["objects"]) == {"Attention"} and not rec["absent"]
    assert not rec["not_implemented"] and source.path == "minicourse-correct/minicourse/attention.py"
    assert any(k.endswith("minicourse/attention.py") for k in rec["texts"])
    rec, _, _ = loaded("minicourse-todo")
    assert "not implemented" in rec["not_implemented"]["Attention"]
    assert rec["stub_at"]["Attention"] == {"file": "minicourse-todo/minicourse/attention.py", "line": 11}
    (tmp_path / "minicourse").mkdir()
    (tmp_path / "minicourse" / "attention.py").write_text("import torch\n\nclass Attn(torch.nn.Module):\n    pass\n")
    rec, _, _ = loaded(str(tmp_path))
    assert rec["absent"] == {"Attention": "absent: minicourse.attention does not define Attention"}
    from harness.source import SubmissionError
    with pytest.raises(SubmissionError, match="no minicourse/attention.py"):
        loaded("minicourse-flat")       # laid out by the parent's copy (pack_copy), not by the loader


def test_the_plan_runs_each_role_probe_with_its_context(loaded, monkeypatch):
    from harness.child.probes import packs
    from harness.child.probes.base import Context
    seen = []

    def mask_probe(rctx):
        seen.append(rctx)
        return [{"id": f"{rctx.binding.component}.mask", "status": "pass", "measured": None, "expected": "",
                 "detail": "", "data": {}}]
    roles = types.ModuleType(packs.ROLES_MODULE)
    roles.ROLE_PROBES = {"attention": (RoleProbe("mask", mask_probe, "quick"), RoleProbe("fit", mask_probe, "train"))}
    roles.RoleContext = RoleContext
    monkeypatch.setitem(sys.modules, packs.ROLES_MODULE, roles)
    rec, module, source = loaded("minicourse-correct")
    from harness.child.probes import Probe
    plan = packs.plan(PACK, rec["edition"], quick=True, probe_type=Probe)
    assert [p.id for p in plan] == ["contract", "Attention.mask"]          # --quick leaves the training one out
    assert [p.id for p in packs.plan(PACK, rec["edition"], quick=False, probe_type=Probe)][-1] == "Attention.fit"
    ctx = Context(module, source, "minicourse", seed=3)
    assert plan[0].fn(ctx)[0]["status"] == "pass"
    (c,) = plan[1].fn(ctx)
    assert c["data"]["component"] == "Attention"
    r = seen[0]
    assert r.student is rec["objects"]["Attention"] and r.reference.__module__ == "minicourse_pack.reference"
    assert r.seed == 3 and r.quick is False and r.binding.mask.blocks == "true"


def test_a_piece_not_written_is_skipped_with_its_reason(loaded, monkeypatch):
    from harness.child.probes import Probe, packs
    from harness.child.probes.base import Context
    monkeypatch.setattr(packs, "role_probes", lambda: ({}, "no generic role probes are installed (x is missing)"))
    rec, module, source = loaded("minicourse-todo")
    plan = packs.plan(PACK, rec["edition"], quick=False, probe_type=Probe)
    ctx = Context(module, source, "minicourse")
    contract = plan[0].fn(ctx)[0]
    assert contract["status"] == "pass" and contract["measured"]["not_implemented"] == ["Attention"]
    (role,) = plan[1].fn(ctx)
    assert role["status"] == "skip" and role["data"]["kind"] == "not-implemented"


def test_grading_reads_a_packs_folder_in_its_layout(installed):
    from harness.grading import discovery
    sub = discovery._in_folder(SUBMISSIONS / "minicourse-flat", "flat", "flat/")
    assert sub.repo and sub.pack == "minicourse"
    discovery._read(sub, discovery.Options())
    assert sub.problem is None and list(sub.files) == ["minicourse/attention.py"] and sub.key
    # a run that grades another assignment takes the one file as that assignment's submission
    other = discovery._in_folder(SUBMISSIONS / "minicourse-flat", "flat", "flat/")
    discovery._read(other, discovery.Options(assignment="block"))
    assert not other.repo and other.path.name == "attention.py" and other.data and other.problem is None
    full = discovery._in_folder(SUBMISSIONS / "minicourse-correct", "c", "c/")
    discovery._read(full, discovery.Options(assignment="minicourse"))
    assert sorted(full.files) == ["minicourse/attention.py"]
