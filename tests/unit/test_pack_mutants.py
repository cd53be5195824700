"""The packs' mutants in the mutant library (mutants/packs.py): read through Pack.mutants, listed and exported with
the others (a pack's as its assignment folder), and turned into self-test cases whose bug lines and file are the
edit's."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest
from click.testing import CliRunner

import mutants
from harness.assignments import PACKS
from harness.cli.mutants import mutants_group
from harness.packs.cs231n.mutants import MUTANTS as CS231N
from harness.selftest import pack_cases
from mutants import packs


def test_the_library_holds_every_packs_declared_mutants():
    assert packs.of_pack("cs231n") == CS231N and set(CS231N) <= set(mutants.ALL_MUTANTS)
    assert mutants.PACK_MUTANTS == packs.every() and "cs231n" in mutants.ALL_ASSIGNMENTS
    assert mutants.get_any("cs231n-value-from-key").cause == "value-from-key"
    # the built-in packs name the library's own registries: every mutant of theirs, once
    assert packs.of_pack("reversal") == tuple(m for m in mutants.MUTANTS if m.assignment == "reversal") != ()
    assert packs.of_pack("lm") == mutants.LM_MUTANTS and packs.of_pack("no-such-pack") == ()


def test_a_pack_whose_mutants_cannot_be_read_is_named_and_adds_none(monkeypatch):
    broken = replace(PACKS["cs231n"], mutants="harness.packs.cs231n.mutants:NO_SUCH_NAME")
    monkeypatch.setitem(PACKS, "cs231n", broken)
    packs.of_pack.cache_clear()
    try:
        with pytest.raises(packs.PackMutantsError, match="cs231n"):
            packs.of_pack("cs231n")
        assert packs.every() == () and any("NO_SUCH_NAME" in p for p in packs.problems())
    finally:
        packs.of_pack.cache_clear()


def test_list_shows_a_packs_mutants_with_and_without_assignment():
    one = CliRunner().invoke(mutants_group, ["list", "--assignment", "cs231n"])
    assert one.exit_code == 0 and [line.split()[0] for line in one.output.splitlines()] == [m.id for m in CS231N]
    every = CliRunner().invoke(mutants_group, ["list"])
    assert {m.id for m in CS231N} <= {line.split()[0] for line in every.output.splitlines()}


def test_export_writes_a_packs_mutant_as_its_assignment_folder(tmp_path):
    r = CliRunner().invoke(mutants_group, ["export", str(tmp_path), "--assignment", "cs231n"])
    assert r.exit_code == 0, r.output
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert len(manifest) == len(CS231N) and all(k.endswith("/") for k in manifest)
    assert not list(tmp_path.glob("submission_*.py"))            # never a single file
    for folder, entry in manifest.items():
        m = mutants.get_any(entry["id"])
        for rel in PACKS["cs231n"].files:
            text = (tmp_path / folder / rel).read_text()
            assert all(e.new in text for e in m.edits if e.new.strip())
            assert "reference" not in text.splitlines()[0]           # the docstring does not give it away


def test_pack_cases_are_folders_with_the_edits_lines_and_file(tmp_path):
    cases = pack_cases(tmp_path, "cs231n")
    assert [c.name for c in cases] == ["reference/cs231n"] + [m.id for m in CS231N]
    ref = cases[0]
    assert ref.expected is None and (ref.path / "cs231n" / "classifiers" / "transformer.py").is_file()
    by = {c.name: c for c in cases}
    vk = by["cs231n-value-from-key"]
    lines = (vk.path / "cs231n" / "transformer_layers.py").read_text().splitlines()
    assert vk.expected == "value-from-key" and "self.value(key)" in lines[vk.bug_lines[0] - 1]
    assert vk.bug_file == ("cs231n/transformer_layers.py",)
    assert by["cs231n-causal-upper"].bug_file == ("cs231n/classifiers/transformer.py",)
    assert set(by["cs231n-mask-batched"].bug_file) == {"cs231n/transformer_layers.py", "cs231n/classifiers/transformer.py"}
