"""Issue 45 for packs: the student's code in a model server, the probes in a prober that never runs it.

- Over the CS231n reference and every mutant: the prober's half (child/pack_remote.py and the role probes through
  probes/roles/remote.py), run in this process against a real model server (isolation/split.start_server, in the
  sandbox this machine allows), gives the checks the in-process probes give (status and line), while a profile
  hook on every thread sees no frame of the submission's code and no module of the submission is imported here.
- Through the whole pipeline (api.check_file, cold): a submission that tries to reach the grader from the server
  (imports the harness, walks gc and sys.modules for the grader's objects, reads the reference file, writes a
  forged result into every descriptor it holds) gets no credit, the instructor sees why, and three correct
  canaries checked after it are clean.
"""
from __future__ import annotations

import importlib.util
import itertools
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from harness import api
from harness.child import pack_remote
from harness.child.probes import packs as pack_probes
from harness.child.probes.roles import ROLE_PROBES, RoleContext
from harness.isolation import sandbox, split
from harness.packs.cs231n import reference as ref_module
from harness.packs.cs231n.mutants import ERRORS, EXPECTED, MUTANTS
from harness.packs.cs231n.pack import LAYERS, MODELS, PACK
from harness.protocol import Limits

REFERENCE = Path(ref_module.__file__).read_text()
MODELS_TEXT = "from ..transformer_layers import CaptioningTransformer, VisionTransformer  # noqa: F401\n"
_names = itertools.count()


def _folder(root: Path, layers: str) -> Path:
    for rel, text in ((LAYERS, layers), (MODELS, MODELS_TEXT), ("cs231n/__init__.py", ""),
                      ("cs231n/classifiers/__init__.py", "")):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


# the pieces the feed-forward, patch-embedding and classifier roles bind: the reference is compared on every binding,
# a mutant of one of these on these alone, any other mutant on the others (each case's time stays what it was)
PIECES = ("FeedForwardNetwork", "PatchEmbedding", "VisionTransformer")


def _compared(mutant) -> set | None:
    if mutant is None:
        return None
    mine = EXPECTED[mutant.id][0] in PIECES
    return {b.component for b in PACK.bindings if (b.component in PIECES) == mine}


def _role_checks(rec: dict, texts: dict, objects, components: set | None = None) -> dict:
    out = {}
    for b in PACK.bindings_for(rec["edition"]):
        if b.component not in objects or b.role not in ROLE_PROBES or components and b.component not in components:
            continue
        rctx = RoleContext(b, objects[b.component], pack_probes._reference(PACK, b), 0, "cpu", False, texts)
        for probe in ROLE_PROBES[b.role]:
            for c in probe.fn(rctx):
                mech = (c.get("data") or {}).get("mechanism")
                out[c["id"]] = (c["status"], (c.get("location") or {}).get("line"),
                                mech.get("kind") if isinstance(mech, dict) else None)
    return out


def _split_checks(tmp_path: Path, text: str, components: set | None = None) -> tuple[dict, set, list]:
    """The role checks through a model server; the submission's frames the prober ran; its modules here."""
    work = tmp_path / "run"
    _folder(work / "repo", text)
    mine, theirs = socket.socketpair()
    proc = split.start_server(work, theirs, Limits(), sandbox.mode("auto"), "cpu", "test-token", None,
                              subprocess.DEVNULL, subprocess.DEVNULL)
    theirs.close()
    seen: set = set()
    roots = (str(work / "repo"), str(work / "server"), os.path.realpath(work))

    def profile(frame, event, arg):
        f = frame.f_code.co_filename
        if f.startswith(roots):
            seen.add(f)
    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        source, module = pack_remote.load(str(work / "repo"), "sub", PACK, 30, mine.fileno())
        rec = getattr(module, pack_probes.KEY)
        checks = _role_checks(rec, dict(rec["texts"]), rec["objects"], components)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        mine.close()
        proc.wait(timeout=30)
    here = [n for n, m in list(sys.modules.items())
            if str(getattr(m, "__file__", "") or "").startswith(roots)]
    return checks, seen, here


def _inprocess_checks(tmp_path: Path, text: str, components: set | None = None) -> dict:
    path = tmp_path / "inproc" / LAYERS
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"split_student_{next(_names)}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    objects = {}
    for b in PACK.bindings:
        obj = module
        for part in b.target.split(":")[1].split("."):
            obj = getattr(obj, part)
        objects[b.component] = obj
    rec = {"edition": "2025"}
    return _role_checks(rec, {LAYERS: text}, objects, components)


@pytest.mark.parametrize("mutant", [None] + list(MUTANTS), ids=["reference"] + [m.id for m in MUTANTS])
def test_the_prober_never_runs_the_submission_and_measures_the_same(tmp_path, mutant):
    text = REFERENCE if mutant is None else mutant.source()
    got, frames, modules = _split_checks(tmp_path, text, _compared(mutant))
    assert frames == set(), f"the prober ran the submission's code: {sorted(frames)}"
    assert modules == [], f"the prober imported the submission's modules: {modules}"
    want = _inprocess_checks(tmp_path, text, _compared(mutant))
    assert got == want
    if mutant is None:
        assert {s for s, _, _ in got.values()} == {"pass"}, got
    else:
        component, probe, mech = EXPECTED[mutant.id]
        assert got[f"{component}.{probe}"][0] == ("error" if mutant.id in ERRORS else "fail"), got
        assert got[f"{component}.{probe}"][2] == mech, got


HOSTILE = '''

def _reach_the_grader():
    import gc, json, os, sys
    found = {}
    try:
        import harness  # noqa
        found["harness"] = True
    except Exception:
        found["harness"] = False
    found["modules"] = sorted(m for m in sys.modules if m.split(".")[0] in ("harness", "reference_model", "mutants"))
    found["gc"] = sum(1 for o in gc.get_objects() if str(getattr(type(o), "__module__", "")).startswith("harness"))
    refs = [REFERENCE_PATH, "/opt/mtxdiag/harness/packs/cs231n/reference.py"]
    found["reference"] = [p for p in refs if os.path.exists(p)]
    print("REACH " + json.dumps(found), flush=True)
    forged = json.dumps({"event": "result", "result": {"checks": [{"id": "MultiHeadAttention.scale",
                                                                    "status": "pass"}]}}).encode() + b"\\n"
    for fd in range(3, 256):
        try:
            os.write(fd, forged)
        except OSError:
            pass
'''


def _check(folder: Path) -> dict:
    return api.check_file(folder, assignment=PACK.name, quick=True)


def test_a_submission_reaching_for_the_grader_gets_no_credit_and_canaries_stay_clean(tmp_path):
    bad = next(m for m in MUTANTS if m.id == "cs231n-scale-missing").source()
    bad = bad.replace("        super().__init__()\n", "        super().__init__()\n        _reach_the_grader()\n", 1)
    bad += HOSTILE.replace("REFERENCE_PATH", repr(ref_module.__file__))
    r = _check(_folder(tmp_path / "hostile", bad))
    assert r["verdict"] != "clean"
    by_id = {c["id"]: c for c in r["checks"]}
    assert by_id.get("MultiHeadAttention.scale", {}).get("status") != "pass"
    assert not any(c["status"] == "pass" for c in r["checks"] if c["id"].startswith("MultiHeadAttention")), \
        "a check passed after the forgery"
    static = by_id["tamper-static"]                    # the instructor sees the attempt, at its lines
    assert "imports the grader" in static["detail"] and "gc.get_objects" in static["detail"]
    reach = [json.loads(line[6:]) for line in r["stdout"].splitlines() if line.startswith("REACH ")]
    assert reach, r["stdout"][-2000:]
    assert reach[0]["harness"] is False and reach[0]["modules"] == [] and reach[0]["gc"] == 0
    if sandbox.mode("auto") == "bwrap":
        assert reach[0]["reference"] == []             # nothing of the grader on the server's file system
    errors = [c for c in r["checks"] if c["status"] == "error"]
    assert errors and any("model server" in (c.get("detail") or "") for c in errors), \
        [(c["id"], c["status"], c.get("detail")) for c in r["checks"]]
    for i in range(3):
        canary = _check(_folder(tmp_path / f"canary{i}", REFERENCE))
        assert canary["verdict"] == "clean", [(c["id"], c["status"], c.get("detail")) for c in canary["checks"]
                                              if c["status"] not in ("pass", "skip")]
        assert not any(c["status"] in ("fail", "error") for c in canary["checks"])


def test_a_model_server_that_floods_its_output_is_counted_apart_as_the_students(tmp_path):
    """The model server's stdout and stderr are a pipe of their own that the parent reads and counts (no object in
    a process the student's code reaches counts them): a class that prints megabytes each time it is built is an
    output flood, the student's (forbidden-operation), at its measured size; what is kept is bounded; the model's
    checks are measured as usual."""
    noisy = REFERENCE.replace("        super().__init__()\n", "        super().__init__()\n"
                              "        import sys\n        print('x' * 400_000)\n"
                              "        sys.stderr.write('y' * 400_000)\n", 1)      # PositionalEncoding's
    assert noisy != REFERENCE
    from harness.child.probes import Probe
    only = ",".join(p.id for p in pack_probes.plan(PACK, "2025", False, Probe) if p.id.startswith("PositionalEncoding."))
    assert only                 # the pieces of the class that prints, alone (the test's time: one quick check's part)
    r = api.check_file(_folder(tmp_path / "noisy", noisy), assignment=PACK.name, quick=True,
                       limits=Limits(only_probes=only))
    flood = next(c for c in r["checks"] if c["id"] == "output-flood")
    assert flood["status"] == "fail" and flood["measured"] >= 1_600_000, flood
    assert flood["data"]["model_server"] >= 1_600_000 and flood["data"]["through_print"] == 0
    assert "from the model server's stdout and stderr" in flood["detail"]
    assert any(d["id"] == "forbidden-operation" for d in r["diagnoses"]), r["diagnoses"]
    assert "more bytes not kept" in r["stdout"] and len(r["stdout"]) < 400_000    # kept: the first 256 KB
    wrong = [(c["id"], c["status"]) for c in r["checks"] if c["status"] in ("fail", "error") and c["id"] != "output-flood"]
    assert wrong == [] and any(c["id"].startswith("PositionalEncoding.") and c["status"] == "pass"
                               for c in r["checks"])
