"""One-file packs (Pack.submission "file", harness/packs/api.py): validated by discovery, planned by their own probes
in their order (child/probes/packs.py), selected as the built-in single-file assignments are (`only`, `extra`,
--quick), and `block` declared as one (harness/packs/block/pack.py) with its probes, order and causes unchanged."""
from __future__ import annotations

import sys
import types
from dataclasses import replace
from typing import NamedTuple

import pytest

from harness import assignments
from harness.packs import discover
from harness.packs.api import Assignment, Binding, Edition, Pack


class _Own(NamedTuple):
    id: str
    fn: object
    cost: str
    side: bool = False


def _probe(ctx):
    return []


@pytest.fixture
def own_probes(monkeypatch):
    """A module `onefile_probes_fixture` whose PROBES a one-file pack names."""
    mod = types.ModuleType("onefile_probes_fixture")
    mod.PROBES = (_Own("contract", _probe, "static"), _Own("shape", _probe, "quick"),
                  _Own("learns", _probe, "train", side=True), _Own("late", _probe, "quick"))
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    return mod


def _file_pack(**kw) -> Pack:
    base = dict(assignment=Assignment(name="onefile", title="t", handed_in="one file", required=("Model",)),
                submission="file", probes="onefile_probes_fixture:PROBES")
    base.update(kw)
    return Pack(**base)


def test_a_sound_one_file_pack_has_no_problems_and_needs_no_folder():
    pack = _file_pack()
    assert pack.is_file and not Pack(assignment=pack.assignment).is_file       # a folder's by default
    assert discover.problems(pack, "onefile") == []


@pytest.mark.parametrize("kw, words", [
    (dict(submission="zip"), "`submission` must be one of"),
    (dict(probes=""), "declares no `probes`"),
    (dict(assignment=Assignment(name="onefile", title="t", handed_in="h", required=())), "requires no names"),
    (dict(files=("a.py",)), "which only a folder's pack has"),
    (dict(bindings=(Binding("attention", "A", "m:A"),)), "which only a folder's pack has"),
    (dict(editions=(Edition("2025"),)), "which only a folder's pack has"),
])
def test_what_a_one_file_pack_lacks_or_must_not_declare_is_said(kw, words):
    wrong = discover.problems(_file_pack(**kw), "onefile")
    assert any(words in w for w in wrong), wrong


def test_a_one_file_packs_probes_are_its_own_in_order_with_side_and_quick(own_probes):
    from harness.child.probes import Probe, packs
    full = packs.plan(_file_pack(), None, False, Probe)
    assert [p.id for p in full] == ["contract", "shape", "learns", "late"]       # no generic contract before them
    assert [p.side for p in full] == [False, False, True, False] and {p.assignments for p in full} == {("onefile",)}
    assert [p.id for p in packs.plan(_file_pack(), None, True, Probe)] == ["contract", "shape", "late"]


def test_select_reads_only_and_extra_for_a_pack_as_for_a_built_in_assignment(own_probes, monkeypatch):
    from harness.child import probes
    monkeypatch.setitem(assignments.PACKS, "onefile", _file_pack())
    ids = lambda **kw: [p.id for p in probes.select("onefile", **kw)]      # noqa: E731
    assert ids(quick=False) == ["contract", "shape", "learns", "late"]
    assert ids(quick=True) == ["contract", "shape", "late"]
    assert ids(quick=True, extra="learns") == ["contract", "shape", "learns", "late"]
    assert ids(quick=True, only="late") == ["contract", "late"]          # a repair's re-check: these and contract


def test_block_is_a_one_file_pack_checked_as_before(tmp_path):
    from harness.child.probes import EITHER, select
    pack = assignments.pack_of("block")
    assert pack is not None and pack.is_file and assignments.BLOCK.pack == "harness.packs.block.pack:PACK"
    assert assignments.BLOCK == replace(pack.assignment, pack=assignments.BLOCK.pack)
    # one file, detected by its names after lm and reversal, never a folder; its causes and mutants still name it
    assert "block" in assignments.SINGLE_FILE and "block" not in assignments.FOLDER
    assert [a.name for a in assignments.DETECT_ORDER] == ["lm", "reversal", "block"]
    (tmp_path / "block.py").write_text("class TransformerBlock:\n    pass\n")
    assert assignments.detect_folder(tmp_path) is None and assignments.for_folder("block") is None
    # the probe ids, order, costs and side of the block assignment (issue 46 item 4: the declaration moves)
    assert [(p.id, p.cost, p.side) for p in select("block", False)] == [
        ("contract", "static", False), ("pe", "static", False), ("pe-relative", "static", False),
        ("block-causal-off", "quick", False), ("block-rows-sum", "quick", False),
        ("block-saturation", "quick", False), ("block-permutation", "quick", False), ("block-causal", "quick", False),
        ("block-residual", "quick", False), ("block-structure", "quick", False), ("block-lm", "train", True)]
    # either process may run its probes but the causal pair (block-causal reads what block-causal-off found)
    assert {"block-rows-sum", "block-saturation", "block-permutation", "block-residual", "block-structure",
            "block-lm"} <= EITHER and not {"block-causal-off", "block-causal"} & EITHER
    import mutants
    assert {m.id for m in discover.load(pack.mutants)} == {m.id for m in mutants.by_assignment("block")} != set()


def test_where_a_packs_probes_run_is_declared_and_block_splits(tmp_path, monkeypatch):
    """Pack.split (issue 45): a folder pack's probes run split by default, a one-file pack's in one process unless
    declared; block is declared "on" (MTXDIAG_PACK_SPLIT=0 runs it in one process, as benches compare); "trial"
    splits only under MTXDIAG_PACK_SPLIT=trial; a notebook stays in one process; a repository pack cannot split yet."""
    from harness.isolation import split
    block = assignments.pack_of("block")
    assert block.split == "on" and block.runs_split("1") and block.runs_split("trial") and not block.runs_split("0")
    assert Pack(assignment=block.assignment).runs_split("1")      # a folder's: on
    assert not _file_pack().runs_split("trial") and _file_pack(split="on").runs_split("1")
    assert _file_pack(split="trial").runs_split("trial") and not _file_pack(split="trial").runs_split("1")
    assert any("`split` must be" in w for w in discover.problems(_file_pack(split="yes"), "onefile"))
    py, nb = tmp_path / "a.py", tmp_path / "a.ipynb"
    py.write_text("class TransformerBlock:\n    pass\n")
    nb.write_text("{}")
    monkeypatch.setenv(split.SWITCH, "1")
    assert split.wanted(block, py) and not split.wanted(block, nb) and not split.wanted(None, py)
    assert split.assignment_of_file(py, assignments.AUTO) == "block" == split.assignment_of_file(py, "block")
    monkeypatch.setenv(split.SWITCH, "0")
    assert not split.wanted(block, py) and split.assignment_of_file(py, assignments.AUTO) == assignments.AUTO
