"""A pack's result read per component (packs/components.py): the rubric (grading/rubric_pack.py through
rubric.score), one Gradescope test per component, the report's checklist; lm's stay lm's."""
from __future__ import annotations

import sys

import pytest

from harness import assignments, engine
from harness.grading import rubric
from harness.packs.api import Assignment, Binding, Edition, Pack
from harness.packs.components import rows

A = Assignment(name="twopiece", title="t", handed_in="h", required=("Attn",), per_component=True)
PACK = Pack(assignment=A, files=("c/m.py",), editions=(Edition("new", {"c/m.py": "pe"}), Edition("old")),
            bindings=(Binding("attention", "Attn", "c.m:Attn", points=6.0),
                      Binding("positional", "PE", "c.m:PE", points=4.0, editions=("new",)),
                      Binding("model", "Model", "c.m:Model", points=10.0, editions=("new",))))


def _result(edition="new", checks=(), diagnoses=(), comps=None):
    comps = comps or {"Attn": {"status": "present"}, "PE": {"status": "present"},
                      "Model": {"status": "not-implemented", "why": "not implemented: forward is the stub"}}
    contract = {"id": "contract", "status": "pass", "measured": {}, "expected": "", "detail": "",
                "data": {"edition": edition, "components": comps}}
    return {"assignment": "twopiece", "verdict": "problems", "checks": [contract, *checks],
            "diagnoses": list(diagnoses)}


def _check(cid, status):
    return {"id": cid, "status": status, "measured": None, "expected": "", "detail": f"{cid} {status}", "data": {}}


@pytest.fixture
def installed(monkeypatch):
    monkeypatch.setitem(assignments.PACKS, "twopiece", PACK)
    monkeypatch.setitem(assignments.BY_NAME, "twopiece", assignments.replace(A, pack="x:PACK"))


def test_each_component_is_read_from_its_checks_and_the_contract():
    r = rows(_result(checks=[_check("Attn.mask", "pass"), _check("Attn.scale", "fail"), _check("PE.formula", "pass")]),
             PACK)
    assert {c: v["status"] for c, v in r.items()} == {"Attn": "fail", "PE": "pass", "Model": "not-implemented"}
    old = rows(_result(edition="old", checks=[_check("Attn.mask", "pass")]), PACK)
    assert list(old) == ["Attn"] and old["Attn"]["status"] == "pass"     # the old edition binds one piece
    named = rows(_result(checks=[_check("PE.formula", "pass")],
                         diagnoses=[{"id": "pe-wrong", "component": "PE", "confidence": 0.9, "evidence": ["e"]}]), PACK)
    assert named["PE"]["status"] == "fail" and named["PE"]["cause"] == "pe-wrong"
    assert named["Attn"]["status"] == "not-checked"


def test_a_methods_checks_are_its_own_not_its_classes():
    pack = Pack(assignment=A, files=("c/m.py",), bindings=(Binding("model", "Model", "c.m:Model"),
                                                           Binding("sampler", "Model.sample", "c.m:Model.sample")))
    r = rows(_result(checks=[_check("Model.loss", "pass"), _check("Model.sample.shape", "fail")],
                     comps={"Model": {"status": "present"}, "Model.sample": {"status": "present"}}), pack)
    assert r["Model"]["status"] == "pass" and r["Model.sample"]["status"] == "fail"


def test_the_rubric_gives_each_component_its_points(installed):
    result = _result(checks=[_check("Attn.mask", "pass"), _check("PE.formula", "fail")])
    g = rubric.score(result, rubric.load())
    assert g["max_score"] == 20.0 and g["score"] == 6.0
    assert [(c["component"], c["points"], c["max_points"]) for c in g["components"]] == [
        ("Attn", 6.0, 6.0), ("PE", 0.0, 4.0), ("Model", 0.0, 10.0)]
    assert {b["id"] for b in g["breakdown"]} == {"PE", "Model"}


def test_gradescope_gets_one_test_per_component(installed):
    from harness.grading.rubric_pack import gradescope_tests
    result = _result(checks=[_check("Attn.mask", "pass"), _check("PE.formula", "fail")])
    g = rubric.score(result, rubric.load())
    tests = gradescope_tests(result, g, PACK)
    assert [t["name"] for t in tests] == ["01 Attn (c.m:Attn)", "02 PE (c.m:PE)", "03 Model (c.m:Model)"]
    assert [t["status"] for t in tests] == ["passed", "failed", "failed"]
    assert all(t["output_format"] == "md" for t in tests)


def test_the_checklist_lists_the_packs_components(installed):
    from harness.report.lm_checklist import rows as checklist
    r = checklist(_result(checks=[_check("Attn.mask", "pass")]))
    assert [(x["component"], x["state"]) for x in r] == [("Attn", "pass"), ("PE", "not run"),
                                                         ("Model", "not implemented")]


def test_a_failing_packs_check_names_its_component(installed):
    c = dict(_check("Attn.mask", "fail"), data={"component": "Attn"})
    d = engine.diagnose(_result(checks=[c]) | {"submission": "s"})
    assert d and d[0]["id"] == "unexplained-failure" and d[0]["component"] == "Attn"


def test_the_skeleton_pack_is_a_valid_pack(tmp_path):
    from click.testing import CliRunner
    from harness.cli.packs import assignment
    from harness.packs.discover import problems
    out = CliRunner().invoke(assignment, ["new", "mycourse", "--dir", str(tmp_path)])
    assert out.exit_code == 0, out.output
    root = tmp_path / "mtxdiag-pack-mycourse"
    assert 'mycourse = "mycourse_pack.pack:PACK"' in (root / "pyproject.toml").read_text()
    sys.path.insert(0, str(root))
    try:
        from mycourse_pack.pack import PACK as made
        assert problems(made, "mycourse") == []
        assert made.bindings[0].role == "attention"
        assert all(f"role=\"{r}\"" in (root / "mycourse_pack" / "pack.py").read_text()
                   for r in ("positional", "layer", "model", "sampler", "training-step"))
    finally:
        sys.path.remove(str(root))
        for m in [m for m in sys.modules if m.startswith("mycourse_pack")]:
            del sys.modules[m]
    again = CliRunner().invoke(assignment, ["new", "mycourse", "--dir", str(tmp_path)])
    assert again.exit_code != 0 and "not overwritten" in again.output
    assert CliRunner().invoke(assignment, ["new", "Bad Name"]).exit_code != 0
    assert CliRunner().invoke(assignment, ["new", "reversal", "--dir", str(tmp_path)]).exit_code != 0


def test_assignment_list_names_the_built_in_ones():
    from click.testing import CliRunner
    from harness.cli.packs import assignment
    out = CliRunner().invoke(assignment, ["list"])
    assert out.exit_code == 0 and all(a.name in out.output for a in assignments.BUILT_IN)


