"""The `lm` corpus (tests/corpus/lm): the manifest is complete and the correct entries really
are correct — they agree with torch's own building blocks (tools/oracle.py) and with each
other on seeded inputs, for every adapter."""
import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch

from harness.lm_table import NAMES, registry_name

LM = Path(__file__).resolve().parents[1] / "corpus" / "lm"
MANIFEST = json.loads((LM / "manifest.json").read_text())
COMPONENTS = {registry_name(c) for c in NAMES}      # the one table (harness/lm_table.py)

_spec = importlib.util.spec_from_file_location("lmcorpus_tools", LM / "tools" / "lmcorpus.py")
lmcorpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lmcorpus)


def _entries(kind):
    return [e for e in MANIFEST if e["kind"] == kind]


def test_manifest_fields_and_files():
    assert len(_entries("correct")) >= 4 and len(_entries("bug")) >= 18 and len(_entries("special")) >= 3
    paths = [e["path"] for e in MANIFEST]
    assert len(paths) == len(set(paths))
    for e in MANIFEST:
        for key in ("path", "form", "kind", "split", "style", "description"):
            assert e.get(key), (e["path"], key)
        p = LM / e["path"]
        assert e["form"] in ("repo", "file") and e["split"] in ("calibration", "holdout")
        if e["form"] == "repo":
            assert (p / "tests" / "adapters.py").is_file(), p
        else:
            assert p.is_file() and p.suffix == ".py", p
    holdout = sum(e["split"] == "holdout" for e in MANIFEST) / len(MANIFEST)
    assert 0.2 <= holdout <= 0.45, holdout
    forms = {e["form"] for e in _entries("correct")}
    assert forms == {"repo", "file"}
    assert sum(e["form"] == "repo" for e in _entries("correct")) >= 2


def test_bug_entries_point_at_real_lines():
    for e in _entries("bug"):
        assert e["component"] in COMPONENTS, e["path"]
        assert e["component"] in e["affects"] and set(e["affects"]) <= COMPONENTS, e["path"]
        assert e["cause"] == e["cause"].lower() and " " not in e["cause"], e["path"]
        assert e["measured_diff"] is not None, e["path"]
        if isinstance(e["measured_diff"], float):
            assert e["measured_diff"] > 0, e["path"]
        assert e["lines"], e["path"]
        for loc in e["lines"]:
            f = LM / e["path"] / loc["file"] if e["form"] == "repo" else LM / e["path"]
            assert f.name == Path(loc["file"]).name
            text = f.read_text().split("\n")
            assert 1 <= loc["line"] <= len(text) and text[loc["line"] - 1].strip(), (e["path"], loc)


def test_special_entries_say_what_to_expect():
    for e in _entries("special"):
        assert set(e["expected"]) == COMPONENTS, e["path"]


@pytest.fixture(scope="module")
def outputs():
    torch.set_num_threads(1)
    out = {}
    with lmcorpus.loaded(LM / "tools" / "oracle.py") as ad:
        out["oracle"] = lmcorpus.run_all(ad)
    for e in _entries("correct"):
        with lmcorpus.loaded(LM / e["path"]) as ad:
            out[e["path"]] = lmcorpus.run_all(ad)
    return out


def _disagreements(a, b):
    bad = {}
    for case, r in b.items():
        assert not isinstance(r, str), (case, r)  # the yardstick itself ran
        d = lmcorpus.diff(a[case], r)
        if d is None or not d <= lmcorpus.tol(case, r):
            bad[case] = a[case] if d is None else d
    return bad


def test_correct_entries_match_torch_builtins(outputs):
    for e in _entries("correct"):
        assert _disagreements(outputs[e["path"]], outputs["oracle"]) == {}, e["path"]


def test_correct_entries_agree_with_each_other(outputs):
    first, *rest = [e["path"] for e in _entries("correct")]
    for path in rest:
        assert _disagreements(outputs[path], outputs[first]) == {}, path


def test_cases_can_tell_a_wrong_output():
    # the comparison itself must not be blind: a perturbed output fails it
    ref = [torch.ones(3, 4, dtype=torch.float64)]
    assert lmcorpus.diff([ref[0] + 1e-3], ref) > lmcorpus.tol("linear", ref)
    assert lmcorpus.diff([ref[0][:2]], ref) == math.inf
    assert lmcorpus.diff("error: boom", ref) is None


@pytest.mark.slow
def test_every_bug_changes_its_component():
    torch.set_num_threads(1)
    with lmcorpus.loaded(LM / "tools" / "oracle.py") as ad:
        ref = lmcorpus.run_all(ad)
    for e in _entries("bug"):
        with lmcorpus.loaded(LM / e["path"]) as ad:
            out = lmcorpus.run_all(ad)
        bad = _disagreements(out, ref)
        assert any(lmcorpus.COMPONENT[c] == e["component"] for c in bad), e["path"]
