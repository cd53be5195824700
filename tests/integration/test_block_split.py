"""Issue 45 for the one-file `block` pack: its file in a model server, its probes in a prober that never runs it.

Over the block reference and every block mutant: the prober's half (child/file_remote.py, the block probes through
the proxies of probes/roles/remote.py and the recorders served by remote_ops.py), run in this process against a
real model server (isolation/split.start_server, in the sandbox this machine allows), gives the checks the
in-process probes gave when the goldens were recorded (tests/unit/goldens: status and line), while a profile hook
on every thread sees no frame of the submission's file and no module of it is imported here. Cheap: the reference
runs every probe but the training one (block-lm, whose split run bench/block_split.py compares), a mutant the
probes its golden fails and those whose cache they read (block-causal-off).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.child.probes import block_plan
from harness.child.probes.base import Context, Skip, StudentError, seed_all
from harness.isolation import sandbox, split
from harness.packs.block.pack import PACK
from harness.protocol import Limits
from served_file import served
from mutants.registry import BLOCK_MUTANTS

ROOT = Path(__file__).resolve().parents[2]
GOLDENS = ROOT / "tests" / "unit" / "goldens"
CASES = [("reference__block", (ROOT / "reference_model" / "block.py").read_text())] + \
    [(m.id, m.source()) for m in BLOCK_MUTANTS]
ALWAYS = ("contract", "block-causal-off")      # the contract gates the rest; causal-off's finding gates two


def _golden(case: str) -> dict:
    payload = json.loads((GOLDENS / f"{case}.json").read_text())["payload"]
    return {c["id"]: (c["status"], (c.get("location") or {}).get("line")) for c in payload["checks"]}


def _run(probes, ctx) -> dict:
    out = {}
    for probe in probes:
        seed_all(0, probe.id)               # as child/main.py seeds each probe
        try:
            checks = probe.fn(ctx)
        except Skip:
            checks = [{"id": probe.id, "status": "skip"}]
        except StudentError as e:
            checks = [{"id": probe.id, "status": "error", "location": {"line": e.line} if e.line else None}]
        for c in checks:
            out[c["id"]] = (c["status"], (c.get("location") or {}).get("line"))
    return out


@pytest.mark.parametrize("case,text", CASES, ids=[c for c, _ in CASES])
def test_the_prober_never_runs_the_block_file_and_measures_the_same(tmp_path, case, text):
    want = _golden(case)
    ids = {p.id for p in block_plan.PROBES if p.cost != "train"}
    if case != "reference__block":          # a mutant: the probes whose checks its golden does not pass
        failing = {k for k, (s, _) in want.items() if s not in ("pass", "skip")}
        ids = {p.id for p in block_plan.PROBES if p.id in ALWAYS or p.id in failing or
               p.id == "block-structure" and "ffn-nonlinear" in failing} & ids
        assert failing, f"{case}'s golden fails no check"
    probes = [p for p in block_plan.PROBES if p.id in ids]
    with served(tmp_path, text, PACK) as (source, module):
        got = _run(probes, Context(module, source, PACK.name, quick=True))
    assert got == {k: v for k, v in want.items() if k in got}, got
    assert set(got) >= {k for k in want if k != "block-lm" and (k in ids or k == "ffn-nonlinear" and
                                                                "block-structure" in ids)}


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
    found["reference"] = [p for p in (REFERENCE_PATH,) if os.path.exists(p)]
    print("REACH " + json.dumps(found), flush=True)
    forged = json.dumps({"event": "result", "result": {"checks": [{"id": "block-saturation",
                                                                    "status": "pass"}]}}).encode() + b"\\\\n"
    for fd in range(3, 256):
        try:
            os.write(fd, forged)
        except OSError:
            pass
'''


def test_a_block_file_reaching_for_the_grader_from_the_server_gets_no_credit(tmp_path, monkeypatch):
    """Split (block's default), a block mutant that looks for the grader from its constructor (imports,
    gc, the reference's file) and writes a forged result into every descriptor it holds: nothing of the grader is
    there, and its bug is not passed (measured as a failure, or the model server it broke is named). Each split
    check is cold (a fresh server and prober): no canary is needed to see the next run unharmed."""
    from harness import api
    from harness.protocol import Limits
    monkeypatch.setenv(split.SWITCH, "1")
    ref = ROOT / "reference_model" / "block.py"      # its path: what the attack looks for
    bad = next(m for m in BLOCK_MUTANTS if m.id == "block-missing-sqrt-dk").source()
    marker = "        super().__init__()\n"
    assert marker in bad
    bad = bad.replace(marker, marker + "        _reach_the_grader()\n", 1) + \
        HOSTILE.replace("REFERENCE_PATH", repr(str(ref)))
    (tmp_path / "bad.py").write_text(bad)
    only = Limits(only_probes="block-saturation")          # the check its bug fails, alone (the test's time)
    r = api.check_file(tmp_path / "bad.py", assignment=PACK.name, quick=True, limits=only)
    by_id = {c["id"]: c for c in r["checks"]}
    assert by_id["block-saturation"]["status"] != "pass" and r["verdict"] != "clean", by_id
    reach = [json.loads(line[6:]) for line in r["stdout"].splitlines() if line.startswith("REACH ")]
    assert reach, r["stdout"][-2000:]
    assert reach[0]["harness"] is False and reach[0]["modules"] == [] and reach[0]["gc"] == 0
    if sandbox.mode("auto") == "bwrap":
        assert reach[0]["reference"] == []             # nothing of the grader on the server's file system
    assert by_id["block-saturation"]["status"] == "fail" or "model server" in by_id["block-saturation"]["detail"]


def test_a_name_from_skipped_top_level_code_is_provided_in_the_server_as_in_process(tmp_path, monkeypatch):
    """A block file whose constructor reads `NORM = functools.partial(torch.nn.LayerNorm, ...)`, a top-level line
    the loader skips (it calls code): in process the NameError makes child/on_demand.py evaluate that line; split,
    the prober judges the same line (on the file's text) and the server runs it (request `define`), so the check
    measures the model instead of erroring, and the line is marked evaluated, as in process."""
    from harness import api
    text = (ROOT / "reference_model" / "block.py").read_text()
    text = text.replace("import math\n", "import functools\nimport math\n", 1).replace(
        "import torch.nn.functional as F\n",
        "import torch.nn.functional as F\n\nNORM = functools.partial(torch.nn.LayerNorm, eps=1e-5)\n", 1)
    text = text.replace("self.norm1 = torch.nn.LayerNorm(d_model)", "self.norm1 = NORM(d_model)")
    assert "NORM(d_model)" in text
    (tmp_path / "norm.py").write_text(text)
    line = text.splitlines().index("NORM = functools.partial(torch.nn.LayerNorm, eps=1e-5)") + 1
    got = {}
    for mode in ("0", "1"):
        monkeypatch.setenv(split.SWITCH, mode)
        r = api.check_file(tmp_path / "norm.py", assignment=PACK.name, quick=True,
                           limits=Limits(only_probes="block-rows-sum"))
        got[mode] = ({c["id"]: c["status"] for c in r["checks"]},
                     [e["line"] for e in r["skipped_code"] if e.get("evaluated_on_demand")])
        assert (r["timings"].get("server.define") == 1) == (mode == "1"), r["timings"]
    assert got["1"] == got["0"] and got["0"][0].get("block-rows-sum") == "pass" and got["0"][1] == [line], got
