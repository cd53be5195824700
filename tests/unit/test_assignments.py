"""Assignments as units (issue 28 item 5): each assignment is declared once in harness/assignments.py, and
the rest of the code asks that registry (`assignment_of(name).is_repository`, `.per_component`, `.trains`,
...) instead of comparing names. The scan below fails on an assignment name typed into a comparison, a
keyword that names an assignment, or a literal list/dict of assignment names outside the registry."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness import allowed, assignments, protocol
from harness.assignments import ALL, AUTO, BLOCK, LM, NAMES, REVERSAL, UNDECLARED, assignment_of, detect, for_folder

ROOT = Path(__file__).resolve().parents[2]
SCANNED = sorted(p for d in ("harness", "mutants", "bench") for p in (ROOT / d).rglob("*.py"))
REGISTRY = ROOT / "harness" / "assignments.py"
WORDS = set(NAMES) | {AUTO}


# ---- the registry ------------------------------------------------------------------------------------------

def test_the_names_are_declared_once_and_read_from_the_registry():
    assert protocol.ASSIGNMENTS is assignments.NAMES
    assert NAMES[:3] == ("reversal", "block", "lm") and NAMES[3:] == assignments.FOLDER_PACKS
    assert "cs231n" in assignments.FOLDER_PACKS        # the built-in packs, found through discovery
    assert assignments.PACKS["block"].is_file and assignments.pack_of("block").assignment.name == BLOCK.name
    assert BLOCK.pack and "block" in assignments.SINGLE_FILE and "block" not in assignments.FOLDER
    assert tuple(allowed.ALLOWED) == NAMES and allowed.allowed("lm") == LM.packages
    assert allowed.allowed(None) == () and allowed.allowed("nonsense") == ()
    assert [assignment_of(n) for n in NAMES] == list(ALL)


def test_an_unknown_name_answers_no_to_every_question():
    for name in (None, "", AUTO, "Reversal", 3, ["lm"]):
        a = assignment_of(name)
        assert a is UNDECLARED and not (a.is_repository or a.per_component or a.trains or a.seq2seq)
        assert a.rubric_table is None and a.required == ()


def test_detection_follows_the_declared_markers():
    def defines(*names):
        return lambda n: n in names
    assert detect(defines("MiniTransformer")) == "reversal"
    assert detect(defines("TransformerBlock")) == "block"
    assert detect(defines("TransformerBlock", "MiniTransformer")) == "reversal"   # a reversal file has a block
    assert detect(defines("run_rope", "TransformerBlock")) == "lm"
    assert detect(defines()) == assignments.DEFAULT.name == "reversal"
    assert all(a.markers for a in ALL)


def test_a_folder_is_only_a_repository_assignment():
    assert for_folder(AUTO) == "lm" and for_folder("lm") == "lm"
    assert for_folder("reversal") is None and for_folder("block") is None and for_folder("x") is None
    assert assignments.REPOSITORY == ("lm",) and assignments.SINGLE_FILE == ("reversal", "block")


def test_the_declared_facts_hold_where_they_are_used():
    import tomllib

    from harness import lm_table
    from harness.child.probes import contract
    assert LM.required == tuple(lm_table.ADAPTER.values())
    import importlib.util
    for a in ALL:
        if a.name in assignments.FOLDER_PACKS:      # a folder pack's reference is a module of its own package
            assert importlib.util.find_spec(assignments.PACKS[a.name].reference), a.name
        else:
            assert (ROOT / "reference_model" / a.reference).is_file(), a.name
        assert a.handed_in and a.title
    default = tomllib.loads((ROOT / "harness" / "grading" / "rubric_default.toml").read_text())
    assert [a.name for a in ALL if a.rubric_table] == ["lm"] and LM.rubric_table in default
    assert REVERSAL.trains and not BLOCK.trains and not LM.trains and REVERSAL.seq2seq
    assert not LM.hides_grader and REVERSAL.hides_grader
    assert "REQUIRED" not in vars(contract)       # the contract probe reads the registry


def test_everything_that_names_an_assignment_names_a_declared_one():
    import mutants
    from harness.causes import CAUSES
    from harness.child.probes import PROBES
    from harness.report.sections import SECTIONS
    named = {a for p in PROBES for a in p.assignments} | {a for c in CAUSES for a in c.assignments} | \
        {m.assignment for m in mutants.ALL_MUTANTS} | {a for s in SECTIONS for a in s.assignments}
    # the generic role probes' causes name the built-in packs' assignments (declared by each pack's Pack.assignment)
    from harness.causes.role_rules import BUILTIN
    assert named == set(NAMES) | {p.name for p in BUILTIN}
    # the built-in assignments (block among them, though declared as a pack), then the added packs that declare
    # mutants (Pack.mutants), in discovery's order; none twice
    built_in = tuple(a.name for a in assignments.BUILT_IN)
    assert mutants.ALL_ASSIGNMENTS == built_in + \
        tuple(p for p in assignments.PACKS if p not in built_in and mutants.packs.of_pack(p)) and mutants.ASSIGNMENTS == assignments.SINGLE_FILE
    assert "cs231n" in mutants.ALL_ASSIGNMENTS and len(set(mutants.ALL_ASSIGNMENTS)) == len(mutants.ALL_ASSIGNMENTS)
    assert len({m.id for m in mutants.ALL_MUTANTS}) == len(mutants.ALL_MUTANTS)


def test_report_sections_are_registered_per_assignment():
    from harness.report import html, lm_sections, sections
    ids = [s.id for s in sections.SECTIONS]
    assert len(ids) == len(set(ids)) and all(callable(s.draw) for s in sections.SECTIONS)
    assert {s.id for s in html.SECTIONS} | {s.id for s in lm_sections.SECTIONS} == set(ids)
    assert all(LM.name in s.assignments for s in lm_sections.SECTIONS)
    for cid, sid in sections.CHECK_SECTION.items():
        assert sid in sections.TITLES, cid


# ---- no assignment name typed outside the registry ---------------------------------------------------------

def _names_in(node) -> set[str] | None:
    """The assignment names a literal is: a name, or a collection of nothing but names (and "auto")."""
    if isinstance(node, ast.Constant) and node.value in NAMES:
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts and \
            all(isinstance(e, ast.Constant) and e.value in WORDS for e in node.elts):
        return {e.value for e in node.elts} & set(NAMES)
    return None


def _mentions_assignment(node) -> bool:
    return "assignment" in ast.unparse(node)


def typed_names(path: Path) -> list[str]:
    """Places in one file that type an assignment name instead of asking the registry."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        where = f"{path.name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Compare):          # x.assignment == "lm", assignment in ("auto", "lm")
            sides = [node.left, *node.comparators]
            if any(_names_in(s) for s in sides) and any(_mentions_assignment(s) for s in sides if not _names_in(s)):
                out.append(f"{where} compares with {ast.unparse(node)}")
        elif isinstance(node, ast.keyword) and node.arg in ("assignment", "assignments") and _names_in(node.value):
            out.append(f"{where} {node.arg}={ast.unparse(node.value)}")
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(_names_in(node) or ()) >= 2:
            out.append(f"{where} lists {ast.unparse(node)}")
        elif isinstance(node, ast.Dict) and len(node.keys) >= 2 and \
                all(isinstance(k, ast.Constant) and k.value in NAMES for k in node.keys):
            out.append(f"{where} keys a table by {[k.value for k in node.keys]}")   # type: ignore[union-attr]
    return sorted(out, key=lambda s: int(s.split(":")[1].split()[0]))


def test_the_scan_finds_what_it_looks_for(tmp_path):
    p = tmp_path / "probe.py"
    text = ('if result.get("assignment") == "lm": pass\nif assignment not in ("auto", "lm"): pass\n'
            'f(x, assignment="reversal")\nT = ("reversal", "block")\nD = {"reversal": 1, "block": 2}\n'
            'if component == "block": pass\nC = ("mha", "block", "lm")\nif a.is_repository: pass\n')
    p.write_text(text)
    found = typed_names(p)
    assert [f.split(":")[1].split()[0] for f in found] == ["1", "2", "3", "4", "5"], found


@pytest.mark.parametrize("path", [p for p in SCANNED if p != REGISTRY], ids=lambda p: str(p.relative_to(ROOT)))
def test_no_assignment_name_is_typed_outside_the_registry(path):
    """Ask harness/assignments.py (`assignment_of(name).is_repository`, `REVERSAL.name`, `NAMES`) instead."""
    assert typed_names(path) == []
