"""A pack written outside the repository (tests/fixtures/packs/mtxdiag-pack-minicourse: a made-up course whose one
assignment is an attention layer with a boolean mask that blocks where True) installed with pip beside mtxdiag in a
fresh venv (tests/installed.py): found by `mtxdiag assignment list`, its submission folders recognised and checked
(the contract, the edition, unwritten pieces) and graded, with no harness change.

What needs the generic role probes (harness/child/probes/roles/, issue 46 part B) is skipped while that module is
absent from this checkout, naming it; those tests run once it lands."""
from __future__ import annotations

import csv
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from installed import CannotInstall, build_wheel, install

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "packs"
SUBMISSIONS = FIXTURES / "submissions"
ROLES = "harness.child.probes.roles"


def _need_roles():
    if importlib.util.find_spec(ROLES) is None:
        pytest.skip(f"needs the generic role probes: module {ROLES} is missing from this checkout (issue 46 part B)")


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A venv holding the mtxdiag wheel and the fixture pack, installed with pip; its bin/ folder."""
    wheel = build_wheel(tmp_path_factory.mktemp("wheel"), tmp_path_factory.mktemp("src"))
    env_dir = tmp_path_factory.mktemp("env") / "venv"
    try:
        py, _ = install(wheel, env_dir)
    except CannotInstall as e:
        pytest.skip(str(e))
    pack_src = tmp_path_factory.mktemp("pack") / "mtxdiag-pack-minicourse"
    import shutil
    shutil.copytree(FIXTURES / "mtxdiag-pack-minicourse", pack_src)
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index",
                        "--no-build-isolation", "-q", str(pack_src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return env_dir / "bin"


def _run(venv: Path, *args, cwd: Path, timeout=300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run([str(venv / "mtxdiag"), *args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env=env)


def _check(venv: Path, name: str, tmp_path: Path, where: Path = SUBMISSIONS) -> dict:
    out = tmp_path / f"{name}.json"
    r = _run(venv, "check", str(where / name), "--no-daemon", "--json", str(out), "--html",
             str(tmp_path / f"{name}.html"), cwd=tmp_path)
    assert out.is_file(), r.stdout[-2000:] + r.stderr[-2000:]
    return json.loads(out.read_text())


def test_the_installed_pack_is_listed(venv, tmp_path):
    r = _run(venv, "assignment", "list", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("minicourse"))
    assert "mtxdiag-pack-minicourse" in line and "2026, 2025" in line
    assert "broken" not in r.stdout


def test_its_folders_are_recognised_and_their_contract_checked(venv, tmp_path):
    for name, edition in (("minicourse-correct", "2026"), ("minicourse-flat", "2025")):
        r = _check(venv, name, tmp_path)
        assert r["assignment"] == "minicourse", name
        contract = next(c for c in r["checks"] if c["id"] == "contract")
        assert contract["status"] == "pass" and contract["data"]["edition"] == edition, (name, contract)
        assert contract["data"]["components"]["Attention"]["status"] == "present"
        assert all(c["id"] == "contract" or c["id"].startswith("Attention.") for c in r["checks"]
                   if c["id"] not in ("tamper", "isolation", "result-channel", "audit")), r["checks"]
    todo = _check(venv, "minicourse-todo", tmp_path)
    assert todo["diagnoses"][0]["id"] == "piece-not-implemented"
    assert todo["diagnoses"][0]["component"] == "Attention"


def test_without_role_probes_the_result_says_it_is_incomplete(venv, tmp_path):
    if importlib.util.find_spec(ROLES) is not None:
        pytest.skip(f"{ROLES} is there: the role probes' own tests below apply")
    r = _check(venv, "minicourse-correct", tmp_path)
    role = next(c for c in r["checks"] if c["id"] == "Attention.role")
    assert role["status"] == "skip" and ROLES in role["detail"]
    assert r["verdict"] == "problems" and [d["id"] for d in r["diagnoses"]] == ["check-not-measured"]


def test_handing_in_the_packs_own_reference_is_caught(venv, tmp_path):
    """The pack's package is the grader's (identity.PACK_PACKAGES): importing its reference is tampering."""
    r = _check(venv, "minicourse-copies-reference", tmp_path, FIXTURES / "submissions-hostile")
    ids = [d["id"] for d in r["diagnoses"]]
    assert ids[0] == "tampering", ids
    # issue 45: the student's code runs in a model server where the pack is not installed (bubblewrap hides it);
    # the parent's scan of the text names the import
    tamper = next(c for c in r["checks"] if c["id"] == "tamper-static")
    assert "minicourse_pack" in str(tamper["measured"])
    assert not any(c["status"] == "pass" for c in r["checks"] if c["id"].startswith("Attention."))


def test_the_pack_is_graded_per_component(venv, tmp_path):
    r = _run(venv, "grade", str(SUBMISSIONS), "--out", str(tmp_path / "g"), "--no-progress", cwd=tmp_path,
             timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = {row["student"]: row for row in csv.DictReader((tmp_path / "g" / "grades.csv").open())}
    assert set(rows) == {"minicourse-correct", "minicourse-buggy", "minicourse-flat", "minicourse-todo"}
    assert all(row["max_score"] == "10" for row in rows.values())       # the binding's points
    assert rows["minicourse-todo"]["score"] == "0" and "piece-not-implemented" in rows["minicourse-todo"]["causes"]


def test_the_gradescope_zip_ships_the_pack(venv, tmp_path):
    """The zip carries the pack's own distribution (gradescope_pack.py), installable with its entry point."""
    import zipfile
    out = tmp_path / "autograder.zip"
    r = _run(venv, "gradescope", "build", "--assignment", "minicourse", "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    z = zipfile.ZipFile(out)
    names = set(z.namelist())
    assert {"pack/pyproject.toml", "pack/minicourse_pack/pack.py", "pack/minicourse_pack/reference.py"} <= names
    assert '"$ROOT/source/pack"' in z.read("setup.sh").decode()
    assert "--assignment minicourse" in z.read("run_autograder").decode()
    z.extractall(tmp_path / "zip", [n for n in names if n.startswith("pack/")])
    w = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                        str(tmp_path / "whl"), str(tmp_path / "zip" / "pack")], capture_output=True, text=True,
                       timeout=300)
    assert w.returncode == 0, w.stderr[-2000:]
    (whl,) = (tmp_path / "whl").glob("*.whl")
    eps = next(n for n in zipfile.ZipFile(whl).namelist() if n.endswith("entry_points.txt"))
    assert "minicourse = minicourse_pack.pack:PACK" in zipfile.ZipFile(whl).read(eps).decode()


def test_the_role_probes_tell_the_correct_from_the_inverted_mask(venv, tmp_path):
    _need_roles()
    good, bad = _check(venv, "minicourse-correct", tmp_path), _check(venv, "minicourse-buggy", tmp_path)
    assert good["verdict"] == "clean", good["diagnoses"]
    assert any(c["id"].startswith("Attention.") and c["status"] == "pass" for c in good["checks"])
    failing = [c for c in bad["checks"] if c["id"].startswith("Attention.") and c["status"] in ("fail", "error")]
    assert failing and bad["verdict"] == "problems"
    top = bad["diagnoses"][0]
    assert top.get("component") == "Attention"
    assert (top.get("location") or {}).get("line") in (25, 26, 27), top       # the masked_fill with ~mask
