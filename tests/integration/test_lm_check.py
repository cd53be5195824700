"""`mtxdiag check` on the `lm` assignment: repositories and single files, through the CLI.

Each check runs the real child process (a few seconds); the full mutant run is `slow`.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli.main import main
from harness.lm_table import ADAPTER

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus" / "lm"
os.environ.setdefault("OMP_NUM_THREADS", "1")


def write_repo(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture
def reference_repo(tmp_path):
    from mutants.lm_export import reference_repo_files
    return write_repo(tmp_path / "student", reference_repo_files())


def edit(repo: Path, rel: str, old: str, new: str) -> Path:
    p = repo / rel
    text = p.read_text()
    assert text.count(old) == 1, old
    p.write_text(text.replace(old, new))
    return repo


def check(path: Path, tmp_path: Path, *extra) -> tuple[int, dict, str]:
    out = tmp_path / "out.json"
    r = CliRunner().invoke(main, ["check", str(path), "--quick", "--json", str(out), "--html",
                                  str(tmp_path / "out.html"), *extra])
    return r.exit_code, json.loads(out.read_text()), r.output


def checks(result: dict) -> dict:
    return {c["id"]: c for c in result["checks"]}


def test_reference_repository_is_clean_with_a_checklist(reference_repo, tmp_path):
    code, r, out = check(reference_repo, tmp_path)
    assert code == 0 and r["verdict"] == "clean" and r["assignment"] == "lm", r["diagnoses"]
    by = checks(r)
    from harness.child.probes.lm.common import COMPONENTS
    assert all(by[f"lm-{c}"]["status"] == "pass" for c, _, _ in COMPONENTS)
    assert "✓ linear" in out and "✓ get-batch" in out     # the component checklist, in the terminal
    html = (tmp_path / "out.html").read_text()
    assert 'id="component-rope"' in html and html.index("component-linear") < html.index("component-lm\"")


def test_training_loop_at_import_does_not_run(reference_repo, tmp_path):
    edit(reference_repo, "cs336_basics/model.py", "import math\n",
         "import math\nimport time\nwhile True:\n    time.sleep(1)\n")
    code, r, _ = check(reference_repo, tmp_path, "--timeout", "60")
    assert r["verdict"] == "clean", r["diagnoses"]
    loop = [s for s in r["skipped_code"] if "while True" in s["code"]]
    assert loop and loop[0]["file"].endswith("cs336_basics/model.py")


def test_subpackage_named_data_is_code_and_loose_scripts_are_not_scanned(reference_repo, tmp_path):
    # ./data holds datasets and is not copied, but cs336_basics/data/ is part of the package
    write_repo(reference_repo, {"cs336_basics/data/__init__.py": "", "cs336_basics/data/ops.py":
                                "def same(x):\n    return x\n",
                                "scripts/train.py": "cfg = eval(open('cfg.txt').read())\n",
                                "data/notes.py": "raise SystemExit('never imported')\n"})
    edit(reference_repo, "cs336_basics/model.py", "import math\n", "import math\nfrom cs336_basics.data.ops import same\n")
    edit(reference_repo, "cs336_basics/model.py", "return x @ self.weight.T ", "return same(x) @ self.weight.T ")
    code, r, _ = check(reference_repo, tmp_path)
    assert code == 0 and r["verdict"] == "clean", r["diagnoses"]
    assert "tamper-static" not in checks(r)


def test_missing_package_is_named_for_the_component_that_needs_it(reference_repo, tmp_path):
    edit(reference_repo, "cs336_basics/model.py", "import math\n", "import math\nimport notinstalled_xyz as nx\n")
    edit(reference_repo, "cs336_basics/model.py", "return x @ self.weight.T ", "return nx.matmul(x, self.weight.T) ")
    code, r, _ = check(reference_repo, tmp_path)
    assert code == 1
    top = r["diagnoses"][0]
    assert top["id"] == "missing-module" and top["component"] == "linear"
    assert "notinstalled_xyz" in top["evidence"][0]
    by = checks(r)
    assert by["lm-linear"]["data"]["missing_module"] == "notinstalled_xyz"
    assert by["lm-rope"]["status"] == "pass" and by["lm-softmax"]["status"] == "pass"   # the rest still checked
    assert [d["id"] for d in r["diagnoses"]] == ["missing-module"]                         # one root cause


def test_missing_tokenizer_dependency_does_not_block_the_model(tmp_path):
    code, r, _ = check(CORPUS / "special" / "repo_missing_tokenizer_dep", tmp_path)
    assert r["verdict"] == "clean", r["diagnoses"]
    info = checks(r)["lm-imports"]
    assert info["status"] == "info" and "No module named" in info["detail"]
    assert "out of scope" in checks(r)["lm-out-of-scope"]["detail"]


def test_half_not_implemented_is_reported_per_component(tmp_path):
    code, r, out = check(CORPUS / "special" / "repo_half_done", tmp_path)
    assert code == 1 and [d["id"] for d in r["diagnoses"]] == ["not-implemented"]
    by = checks(r)
    todo = [c for c, v in by.items() if (v.get("data") or {}).get("kind") == "not-implemented"]
    assert todo and all(by[c]["status"] == "skip" for c in todo)
    # the components' own checks are named in the diagnosis; a property check of an unimplemented model
    # (lm-parameters) skips as not implemented too, without being a component
    todo = [c for c in todo if c.replace("lm-", "") in ADAPTER]
    assert all(c.replace("lm-", "") in r["diagnoses"][0]["evidence"][0] for c in todo)
    assert by["lm-linear"]["status"] == "pass"
    assert "(not implemented)" in out


def test_state_dict_key_mismatch_names_both_sides(reference_repo, tmp_path):
    model = "cs336_basics/model.py"
    edit(reference_repo, model, "        self.weight = nn.Parameter(weight)                          # (d_out, d_in)\n",
         "        self.W = nn.Parameter(weight)\n")
    edit(reference_repo, model, "return x @ self.weight.T ", "return x @ self.W.T ")
    code, r, _ = check(reference_repo, tmp_path)
    top = r["diagnoses"][0]
    assert top["id"] == "interface-mismatch" and top["component"] == "linear"
    assert '"W"' in top["evidence"][0] and '"weight"' in top["evidence"][0]
    assert len(r["diagnoses"]) == 1       # mha, block and lm fail through Linear: folded in
    # located where the student names the parameter (probes/lm_where.py), not inside load_state_dict
    line = (reference_repo / model).read_text().splitlines()[top["location"]["line"] - 1]
    assert top["location"]["file"].endswith(model) and "self.W = nn.Parameter" in line, top["location"]


def test_known_bug_is_named_by_its_fingerprint_and_folds_the_rest(reference_repo, tmp_path):
    # written differently from the mutant's text: the outputs, not the code, are matched
    edit(reference_repo, "cs336_basics/model.py", "torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)",
         "(x * x).mean(-1, keepdim=True).sqrt() + self.eps")
    code, r, _ = check(reference_repo, tmp_path)
    assert [(d["id"], d["component"]) for d in r["diagnoses"]] == [("rmsnorm-eps-outside-sqrt", "rmsnorm")]
    top = r["diagnoses"][0]
    assert top["confidence"] >= 0.9 and "5 draws" in top["evidence"][0]
    c = checks(r)["lm-rmsnorm"]
    assert c["status"] == "fail" and c["measured"]["max_rel"] > 1e-2
    assert len(r["diagnoses"]) == 1


def test_bug_outside_the_library_is_named_by_a_property(reference_repo, tmp_path):
    # positions shifted by one: no mutant does this; RoPE then rotates at position 0
    for t in ("cos", "sin"):
        edit(reference_repo, "cs336_basics/model.py", f"{t} = self.{t}[token_positions]",
             f"{t} = self.{t}[token_positions + 1]")
    code, r, _ = check(reference_repo, tmp_path)
    top = r["diagnoses"][0]
    assert (top["id"], top["component"]) == ("rope-rotates-at-position-0", "rope")
    assert 0.8 <= top["confidence"] < 0.95
    assert checks(r)["lm-rope-relative"]["status"] == "pass"    # still relative: only the offset is wrong
    assert [d["id"] for d in r["diagnoses"]] == ["rope-rotates-at-position-0"]


def test_causal_leak_beyond_the_library_is_named_by_the_causal_property(reference_repo, tmp_path):
    edit(reference_repo, "cs336_basics/model.py", "torch.tril(torch.ones(seq, seq, dtype=torch.bool, device=x.device))",
         "torch.tril(torch.ones(seq, seq, dtype=torch.bool, device=x.device), diagonal=2)")
    code, r, _ = check(reference_repo, tmp_path)
    top = r["diagnoses"][0]
    assert (top["id"], top["component"]) == ("future-tokens-visible", "mha")
    assert checks(r)["lm-lm-causal"]["status"] == "fail" and len(r["diagnoses"]) == 1
    # located by first divergence (student's ops against the reference's): the line that builds the mask
    assert top["location"]["file"].endswith("cs336_basics/model.py")
    line = (reference_repo / "cs336_basics/model.py").read_text().splitlines()[top["location"]["line"] - 1]
    assert "diagonal=2" in line, (top["location"], line)


def test_single_file_form(tmp_path):
    from mutants.lm_export import reference_single_file
    f = tmp_path / "mine.py"
    f.write_text(reference_single_file())
    code, r, _ = check(f, tmp_path)
    assert code == 0 and r["assignment"] == "lm" and r["verdict"] == "clean", r["diagnoses"]


def test_folder_without_adapters_and_wrong_assignment(tmp_path):
    (tmp_path / "repo" / "pkg").mkdir(parents=True)
    (tmp_path / "repo" / "pkg" / "__init__.py").write_text("")
    code, r, _ = check(tmp_path / "repo", tmp_path)
    assert code == 1 and r["diagnoses"][0]["id"] == "missing-name"
    assert "adapters" in r["diagnoses"][0]["evidence"][0]
    res = CliRunner().invoke(main, ["check", str(tmp_path / "repo"), "--assignment", "block"])
    assert res.exit_code == 2


