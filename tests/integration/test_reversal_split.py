"""Issue 45 for the one-file `reversal` pack, on trial: its file in a model server, its probes in a prober.

The reversal reference checked split (child/file_remote.py, the reversal probes through the proxies of
probes/roles/remote.py, a real model server started by isolation/split.start_server in the sandbox this machine
allows) gives, for the probes that already run over the server, the checks (status and line) the in-process
probes gave when the golden was recorded (tests/unit/goldens/reference__reversal.json), while a profile hook on
every thread sees no frame of the file and no module of it is imported here. The probes that still read the
student's modules in process (forward hooks, a submodule's weights, the training trace) are not run here:
bench/block_split.py --assignment reversal lists where they differ. Cheap: one file, the quick probes but the
overfit run.
"""
from __future__ import annotations

import json
from pathlib import Path

from harness.child.probes import reversal_plan
from harness.child.probes.base import Context, Skip, StudentError, seed_all
from harness.isolation import split
from harness.packs.reversal.pack import PACK
from served_file import served

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "unit" / "goldens" / "reference__reversal.json"
# the probes that run over the model server and give the in-process checks (issue 45's trial, 2026-12-08)
MATCHING = ("contract", "shapes", "param-count", "data", "pe", "eval-determinism", "batch-independence",
            "first-loss", "attn-rows-sum", "attn-saturation", "heads-permutation", "causal-leak", "causal-leak-train",
            "padding-invariance", "padded-row-finite", "gradient-flow", "residual", "stateless-forward",
            "embedding-scale", "long-inputs", "decode", "decode-determinism", "decode-consistency")


def _checks(probes, ctx) -> dict:
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


def test_the_reversal_reference_split_gives_the_in_process_checks(tmp_path):
    payload = json.loads(GOLDEN.read_text())["payload"]
    want = {c["id"]: (c["status"], (c.get("location") or {}).get("line")) for c in payload["checks"]}
    probes = [p for p in reversal_plan.PROBES if p.id in MATCHING]
    assert len(probes) == len(MATCHING)
    with served(tmp_path, (ROOT / "reference_model" / "reversal.py").read_text(), PACK) as (source, module):
        got = _checks(probes, Context(module, source, PACK.name, quick=True))
    both = [k for k in got if k in want]    # causal-leak-train's check is newer than the golden
    assert len(both) >= 25, got             # every check of those probes came back (pe's two, data's two, decode's)
    assert {k: got[k] for k in both} == {k: want[k] for k in both}, got


def test_reversal_splits_only_on_trial(monkeypatch):
    """reversal is declared "trial" (issue 45): split only with MTXDIAG_PACK_SPLIT=trial, a notebook never."""
    from harness import assignments
    monkeypatch.setenv(split.SWITCH, "1")
    assert PACK.split == "trial" and not split.wanted(PACK, ROOT / "reference_model" / "reversal.py")
    monkeypatch.setenv(split.SWITCH, "trial")
    assert split.wanted(PACK, ROOT / "reference_model" / "reversal.py")
    assert not split.wanted(PACK, ROOT / "submissions" / "reversal_lesson.ipynb")
    assert split.assignment_of_file(ROOT / "submissions" / "reversal_lesson.py", assignments.AUTO) == PACK.name
