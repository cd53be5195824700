"""`check --repair/--fix` on what repairs do not edit (a notebook, a repository, a cuda run) says so plainly,
tries nothing and writes nothing (in-process: the check itself is replaced, no process starts)."""
from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

import harness.cli.main as cli
from harness.cli.main import main, not_repaired_why

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "tests" / "fixtures" / "correct" / "reversal_notebook_style.ipynb"


def _fake_result(path):
    loc = {"file": path.name, "line": 3, "cell": 2, "cell_line": 1}
    return {"submission": path.name, "assignment": "reversal", "quick": True, "verdict": "problems",
            "diagnoses": [{"id": "missing-sqrt-dk", "title": "Scores not scaled", "confidence": 0.9,
                           "evidence": ["e"], "fix": "Divide by sqrt(d_k).", "why": "w", "location": loc}],
            "checks": [{"id": "a", "status": "fail"}], "timings": {"total_s": 1.0}, "error": None}


def test_why_names_the_reason():
    assert "notebooks are not repaired" in not_repaired_why(NOTEBOOK, "cpu")
    assert "nbconvert" in not_repaired_why(NOTEBOOK, "cpu")
    assert "repository" in not_repaired_why(ROOT / "tests", "cpu")
    assert "CPU only" in not_repaired_why(ROOT / "harness" / "api.py", "cuda")
    assert not_repaired_why(ROOT / "harness" / "api.py", "cpu") is None


def test_notebook_fix_says_notebooks_are_not_repaired(tmp_path, monkeypatch):
    nb = tmp_path / NOTEBOOK.name
    nb.write_bytes(NOTEBOOK.read_bytes())
    tried = []
    monkeypatch.setattr(cli, "check_file", lambda path, **kw: (tried.append(kw["limits"]), _fake_result(path))[1])
    monkeypatch.setattr(cli, "_repair", lambda *a, **kw: tried.append("repair"))
    for flag in ("--fix", "--repair"):
        res = CliRunner().invoke(main, ["check", str(nb), "--no-daemon", flag, "--json", str(tmp_path / "r.json"),
                                        "--html", str(tmp_path / "r.html")])
        assert res.exit_code == 1, res.output
        assert "notebooks are not repaired" in res.output
        assert "no located diagnosis" not in res.output
        assert "nothing written" not in res.output
    assert "repair" not in tried and not any(lim.coverage for lim in tried)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([nb.name, "r.json", "r.html"])
