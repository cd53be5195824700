"""The reference's measured brief training reaches the report through the parent (bug: a full `reversal` check in
the sandbox said "reference after the same training: None"): the child neither reads nor sees
reference_model/brief_training.json; the engine fills its numbers into the checks that compare with them. The
sandbox's snapshot carries exactly the data files the child reads (sandbox.CHILD_DATA)."""
from __future__ import annotations

from pathlib import Path

from test_imports import imports_of, modules

from harness import reference_curves as RC
from harness.isolation import sandbox

ROOT = Path(__file__).resolve().parents[2]


def _checks(status="info"):
    return [{"id": "decode-accuracy", "status": status, "expected": ""},
            {"id": "cross-attn-pattern", "status": status, "expected": "anti-diagonal"},
            {"id": "brief-training", "status": status, "expected": "falls well below ln 13 = 2.565"}]


def test_the_reference_numbers_are_filled_in_from_the_file():
    ref = RC.load()
    assert ref is not None, f"{RC.PATH} is missing or unreadable"
    checks = _checks()
    RC.fill_expected(checks, ref)
    acc, mass = RC.number(ref, "decode-accuracy"), RC.number(ref, "cross-attn-pattern")
    assert isinstance(acc, float) and isinstance(mass, float)
    assert checks[0]["expected"] == f"reference after the same training: {acc:g}"
    assert checks[1]["expected"] == f"anti-diagonal (reference after the same training: {mass:g} of the mass)"
    assert checks[2]["expected"] == "falls well below ln 13 = 2.565"


def test_without_the_file_or_its_number_the_childs_text_stays():
    for ref in (None, {}, {"decode_accuracy": None, "cross_attn_pattern": {"kind": "mixed"}},
                {"decode_accuracy": "0.1", "cross_attn_pattern": [0.4]}):
        checks = _checks()
        RC.fill_expected(checks, ref)
        assert [c["expected"] for c in checks] == [c["expected"] for c in _checks()]
        assert not any("None" in c["expected"] for c in checks)


def test_a_skipped_check_gets_no_reference():
    checks = _checks("skip")
    RC.fill_expected(checks, RC.load())
    assert [c["expected"] for c in checks] == [c["expected"] for c in _checks("skip")]


def test_no_child_side_module_reaches_the_reference_measurements():
    known = modules()
    graph = {n: imports_of(n, p, known) for n, p in known.items()}
    seen, todo = set(), [n for n in known if n.startswith("harness.child")]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        todo.extend(graph.get(n, ()))
    assert "harness.reference_curves" not in seen


def test_the_snapshot_carries_the_childs_data_files_and_no_other():
    for pkg, names in sandbox.CHILD_DATA.items():
        for name in names:
            assert (ROOT / pkg / name).is_file(), f"CHILD_DATA names {pkg}/{name}, which does not exist"
    snap = sandbox.runtime_snapshot()
    data = sorted(str(f.relative_to(snap)) for f in snap.rglob("*") if f.is_file() and f.suffix != ".py")
    assert data == sorted(f"{pkg}/{n}" for pkg, names in sandbox.CHILD_DATA.items() for n in names)
    assert not (snap / "reference_model" / "brief_training.json").exists()
