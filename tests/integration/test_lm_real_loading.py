"""Loading real `lm` repositories (issue 25, item 6), on repositories written for these tests from the
project's own reference: a package named like a standard-library module, a newer Python's typing name, and
sys.path additions into the repository. Each runs the real child."""
from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner

from harness.cli.main import main

os.environ.setdefault("OMP_NUM_THREADS", "1")


def _repo(root: Path, package: str, adapters_prefix: str = "", import_from: str | None = None,
          model_edit=None) -> Path:
    from mutants.lm_export import reference_repo_files
    for rel, text in reference_repo_files().items():
        rel = rel.replace("cs336_basics/", f"{package}/")
        if rel == "tests/adapters.py":
            text = text.replace("from cs336_basics.model import", f"from {import_from or package + '.model'} import")
            text = text.replace("import torch\n", "import torch\n" + adapters_prefix, 1)
        elif rel.endswith("model.py") and model_edit:
            text = model_edit(text)
        text = text.replace("cs336_basics", package)
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _check(path: Path, tmp_path: Path) -> dict:
    out = tmp_path / "out.json"
    CliRunner().invoke(main, ["check", str(path), "--quick", "--no-daemon", "--assignment", "lm",
                              "--json", str(out), "--html", str(tmp_path / "out.html")])
    return json.loads(out.read_text())


def _all_components_pass(r: dict):
    from harness.lm_table import COMPONENTS
    by = {c["id"]: c for c in r["checks"]}
    bad = {c: by.get(f"lm-{c}", {}).get("detail") for c, _, _ in COMPONENTS
           if by.get(f"lm-{c}", {}).get("status") != "pass"}
    assert not bad, bad


def _with_override(text: str) -> str:
    """The model written for Python 3.12: `from typing import override` on a method."""
    assert "class RMSNorm" in text and "    def forward(self, x" in text
    head, tail = text.split("class RMSNorm", 1)
    tail = tail.replace("    def forward(self, x", "    @override\n    def forward(self, x", 1)
    return "from typing import override\n" + head + "class RMSNorm" + tail


def test_package_named_like_a_stdlib_module_with_a_newer_pythons_typing_name(tmp_path):
    # `code` is a standard-library module the child has usually imported already; 3.11 has no typing.override
    r = _check(_repo(tmp_path / "repo", "code", model_edit=_with_override), tmp_path)
    _all_components_pass(r)
    assert r["verdict"] == "clean", r["diagnoses"]
    env = [d for d in r["diagnoses"] if d["id"] == "needs-newer-python"]
    assert env and env[0]["severity"] == "info" and "typing.override" in " ".join(env[0]["evidence"])
    assert env[0]["location"]["line"] == 1 and env[0]["location"]["file"].endswith("model.py")


def test_sys_path_additions_into_the_repository_are_honoured(tmp_path):
    # one path hard-coded on the student's machine, one relative to the adapters' own folder
    foreign = ("import sys\nfrom pathlib import Path\n"
               "sys.path.append('/home/someone/projects/assignment1-basics/mymodels')\n"
               "sys.path.insert(0, str(Path(__file__).parent / 'helpers'))\n")
    repo = _repo(tmp_path / "repo", "mymodels", foreign, import_from="model")
    (repo / "tests" / "helpers").mkdir()
    (repo / "tests" / "helpers" / "extra_util.py").write_text("SCALE = 1.0\n")
    adapters = repo / "tests" / "adapters.py"
    adapters.write_text(adapters.read_text().replace("from model import", "from extra_util import SCALE\n"
                                                     "from model import", 1))
    r = _check(repo, tmp_path)
    _all_components_pass(r)
    assert r["verdict"] == "clean", r["diagnoses"]
    assert not any(d["id"] == "missing-module" for d in r["diagnoses"])
