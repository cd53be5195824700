"""Assignment lm is scored per component in the grader's process (harness/grading/rubric_lm.py): property checks are
evidence, never components; the rubric's own [lm] table counts; what costs no component (tampering) costs what
[causes] says; the brief training charges the component it located; the gradebook counts components to
re-teach; Gradescope gets one test per component, from a folder holding a repository."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.grading import gradebook, rubric
from harness.checks import LM_COMPONENTS

ROOT = Path(__file__).resolve().parents[2]


def lm_result(failing=(), diagnoses=(), extra_checks=()):
    """A validated-looking lm result: one check per component, property checks too (their ids start with lm-)."""
    checks = [{"id": f"lm-{c}", "status": "fail" if c in failing else "pass", "measured": None, "expected": "",
               "detail": "", "data": {"component": c}, "location": None} for c in LM_COMPONENTS]
    for pid in ("lm-rope-identity-at-0", "lm-rope-norm", "lm-rmsnorm-scale", "lm-softmax-shift", "lm-mha-causal",
                "lm-imports", "lm-out-of-scope"):
        checks.append({"id": pid, "status": "fail" if "rope" in failing and "rope" in pid else "pass",
                       "measured": None, "expected": "", "detail": "", "data": {"property": "x"}, "location": None})
    checks += list(extra_checks)
    return {"schema": 1, "assignment": "lm", "verdict": "problems" if failing or diagnoses else "clean",
            "checks": checks, "diagnoses": list(diagnoses), "error": None}


def diag(cid, component=None, explains=()):
    d = {"id": cid, "title": cid, "confidence": 0.95, "evidence": [f"{cid}: measured"], "location": None}
    if component:
        d["component"] = component
    return d


def test_property_checks_are_evidence_not_components():
    r = lm_result(failing=("rope", "mha-rope", "block", "lm"), diagnoses=[diag("rope-sin-cos-swapped", "rope")])
    g = rubric.score(r, rubric.load())          # raised KeyError: unknown lm component 'rope-identity-at-0'
    assert [b["id"] for b in g["breakdown"]] == ["rope"]
    assert g["score"] == 100 - rubric.load().lm["components"]["rope"]
    rows = {c["component"]: c for c in g["components"]}
    assert set(rows) == set(LM_COMPONENTS)
    assert rows["block"]["points"] == rows["block"]["max_points"] and "charged there" in rows["block"]["why"]


def test_correct_code_is_full_marks_and_a_missing_check_is_not_credit():
    assert rubric.score(lm_result(), rubric.load())["score"] == 100
    r = lm_result()
    r["checks"] = [c for c in r["checks"] if c["id"] != "lm-adamw"]
    g = rubric.score(r, rubric.load())
    assert g["score"] == 100 - rubric.load().lm["components"]["adamw"]
    assert "could not be checked" in g["breakdown"][0]["title"]


def test_the_rubrics_own_lm_table_is_used():
    text = rubric.DEFAULT_PATH.read_text().split("[lm]")[0] + (
        "[lm]\nmax_score = 100\n[lm.components]\n" + "\n".join(
            f'"{c}" = {100 - (len(LM_COMPONENTS) - 1) if c == "rope" else 1}' for c in LM_COMPONENTS))
    custom = rubric.parse(text)
    r = lm_result(failing=("rope",), diagnoses=[diag("rope-sin-cos-swapped", "rope")])
    assert rubric.score(r, custom)["score"] == len(LM_COMPONENTS) - 1
    with pytest.raises(rubric.RubricError, match="unknown component"):
        rubric.parse("max_score = 100\n[lm]\n[lm.components]\nattention = 100\n")


def test_tampering_costs_what_the_causes_table_says():
    r = lm_result(diagnoses=[diag("tampering")])
    assert rubric.score(r, rubric.load())["score"] == 0
    r = lm_result(diagnoses=[diag("forbidden-operation")])
    assert rubric.score(r, rubric.load())["score"] == 100        # an integrity flag, 0 points by default


def test_the_brief_training_charges_the_component_it_located():
    train = {"id": "lm-training", "status": "fail", "measured": {}, "expected": "", "detail": "leaves it at step 2",
             "data": {"component": "adamw", "culprits": ["adamw"]}, "location": None}
    r = lm_result(diagnoses=[dict(diag("training-fails", "adamw"))], extra_checks=[train])
    g = rubric.score(r, rubric.load())
    assert [b["id"] for b in g["breakdown"]] == ["adamw"] and g["breakdown"][0]["cause"] == "training-fails"
    train["status"] = "pass"
    assert rubric.score(lm_result(extra_checks=[train]), rubric.load())["score"] == 100


def test_a_training_failure_explained_upstream_is_not_charged_twice():
    """A rope bug: rope, mha-rope, block and lm fail their checks, the training locates the model (lm). The
    results' diagnoses carry no `explains`; lm's credit is its check's (inherited), not the training's."""
    train = {"id": "lm-training", "status": "fail", "measured": {}, "expected": "", "detail": "leaves it at step 0",
             "data": {"component": "lm", "culprits": ["model"]}, "location": None}
    r = lm_result(failing=("rope", "mha-rope", "block", "lm"), diagnoses=[diag("rope-halves-not-pairs", "rope")],
                  extra_checks=[train])
    g = rubric.score(r, rubric.load())
    assert [b["id"] for b in g["breakdown"]] == ["rope"], g["breakdown"]
    assert g["score"] == 100 - rubric.load().lm["components"]["rope"]
    # the same training failure with lm's own check passing: the training alone finds lm wrong, and charges it
    r = lm_result(diagnoses=[diag("training-fails", "lm")], extra_checks=[train])
    assert [b["id"] for b in rubric.score(r, rubric.load())["breakdown"]] == ["lm"]




def test_gradebook_counts_components_to_reteach():
    rub = rubric.load()
    rows = []
    for i, comp in enumerate(("rope", "rope", "adamw")):
        r = lm_result(failing=(comp,), diagnoses=[diag(f"{comp}-bug", comp)])
        r["grade"] = rubric.score(r, rub)
        rows.append(gradebook.row_from_result(f"s{i}", r, Path("/nonexistent")))
    summary = gradebook.component_summary(rows)
    assert [(s["id"], s["count"]) for s in summary] == [("rope", 2), ("adamw", 1)]
    assert "rope-bug (2)" in summary[0]["title"]
    assert "What to re-teach (lm)" in gradebook.html_text(rows)


def test_gradescope_grades_a_repository_and_never_leaves_old_results(tmp_path, monkeypatch):
    from harness.grading import gradescope
    from harness.grading.grade import Options
    sub = tmp_path / "submission" / "assignment1-basics"
    (sub / "tests").mkdir(parents=True)
    (sub / "tests" / "adapters.py").write_text("from cs336_basics.model import *\n")
    (sub / "cs336_basics").mkdir()
    (sub / "cs336_basics" / "__init__.py").write_text("")
    (sub / "cs336_basics" / "model.py").write_text("X = 1\n")
    seen = {}

    def checker(path, **kw):
        seen["files"] = sorted(p.relative_to(path).as_posix() for p in Path(path).rglob("*.py"))
        seen["assignment"] = kw["assignment"]
        return dict(lm_result(failing=("rope",), diagnoses=[diag("rope-sin-cos-swapped", "rope")]),
                    submission=str(path), harness_version="x", quick=True, skipped_code=[], stdout="", stderr="",
                    artifacts={}, timings={"total_s": 1.0})
    out = tmp_path / "results" / "results.json"
    out.parent.mkdir()
    out.write_text('{"score": 100}')
    done = gradescope.gradescope_one(tmp_path / "submission", out, options=Options(quick=True), checker=checker)
    assert seen == {"files": ["cs336_basics/__init__.py", "cs336_basics/model.py", "tests/adapters.py"],
                    "assignment": "lm"}
    res = json.loads(out.read_text())
    assert res == done["results"] and res["score"] == 90
    assert len([t for t in res["tests"] if "lm-component" in t["tags"]]) == len(LM_COMPONENTS)
    # a failure while scoring writes a grader fault, never leaves the earlier results.json
    monkeypatch.setattr(rubric, "lm_score", lambda *a: 1 / 0)
    gradescope.gradescope_one(tmp_path / "submission", out, options=Options(quick=True), checker=checker)
    res = json.loads(out.read_text())
    assert res["score"] == 0 and "grader" in res["output"].lower()


def test_reteach_says_not_implemented_and_leaves_info_notes_out():
    """A component that raises NotImplementedError reads 'not implemented' (the NotImplementedRule names only
    the first such component), and an info note is neither a component's cause nor a bug to re-teach."""
    rub = rubric.load()
    todo = {"status": "skip", "measured": None, "expected": "", "detail": "", "location": None,
            "data": {"kind": "not-implemented"}}
    train = {"id": "lm-training", "status": "fail", "measured": {}, "expected": "", "detail": "diverges",
             "data": {"component": "linear", "culprits": ["linear"]}, "location": None}
    note = dict(diag("robustness-note", "linear"), severity="info")
    r = lm_result(diagnoses=[dict(diag("not-implemented", "adamw"), severity="problem"), note],
                  extra_checks=[train])
    for comp in ("adamw", "gradient-clipping"):
        r["checks"] = [dict(todo, id=f"lm-{comp}") if c["id"] == f"lm-{comp}" else c for c in r["checks"]]
    r["grade"] = rubric.score(r, rub)
    row = gradebook.row_from_result("s0", r, Path("/nonexistent"))
    summary = {s["id"]: s["title"] for s in gradebook.component_summary([row])}
    assert summary["adamw"] == summary["gradient-clipping"] == "not implemented (1)"
    assert "robustness-note" not in summary["linear"] and "(no diagnosis)" not in str(summary)
    bugs = {c["id"] for c in gradebook.cause_summary([row])}
    assert "robustness-note" not in bugs and "not-implemented" in bugs
    assert "robustness-note" in row["causes"]              # still listed on the student's row
    html = gradebook.html_text([row])
    assert "not implemented (1)" in html and "(no diagnosis)" not in html
