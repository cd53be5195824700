"""A library's own behaviour is not the student's: legitimate torch usage is never reported as tampering.

tests/fixtures/legit/ holds complete, correct `reversal` files that use torch features which wrap or patch
things themselves (LR schedulers wrap Optimizer.step, torch.compile patches nn.Module, hooks, autocast,
checkpointing, parametrizations, GradScaler, seeding and thread settings inside train()). Each must come
back without `tampering` - and clean. The opposite side (real monkeypatching from the student's file is
still caught, with the student's line) is in tests/integration/test_hostile.py.
"""
from __future__ import annotations

import types
from pathlib import Path

import pytest

from harness.child import guard
from harness.api import check_file
from harness.runner import Limits

LEGIT = Path(__file__).resolve().parents[1] / "fixtures" / "legit"
FILES = sorted(LEGIT.glob("legit_*.py"))
FAST = {"legit_adamw_lambdalr", "legit_onecycle_bf16"}     # the two the issue names run in the default suite


@pytest.mark.parametrize("path", [pytest.param(f, id=f.stem, marks=() if f.stem in FAST else pytest.mark.slow)
                                  for f in FILES])
def test_legitimate_torch_usage_is_not_tampering(path):
    r = check_file(path, quick=True, limits=Limits(timeout_s=240, memory_mb=3072))
    ids = [d["id"] for d in r["diagnoses"]]
    tamper = [c for c in r["checks"] if c["id"] in ("tamper", "tamper-static") and c["status"] == "fail"]
    assert "tampering" not in ids and not tamper, (ids, [c["detail"] for c in tamper])
    # nor an audited forbidden operation (compile, autocast, checkpointing read and load what torch needs)
    assert not any(c["id"] in ("forbidden-ops", "output-flood") for c in r["checks"]), ids
    # the training trace really ran the student's train(), so torch's side effects really happened
    trace = next(c for c in r["checks"] if c["id"].startswith("train"))
    assert trace["status"] != "skip", trace
    assert r["verdict"] == "clean", (ids, [(c["id"], c["detail"][:200]) for c in r["checks"]
                                          if c["status"] in ("fail", "error")])


# ---------------------------------------------------------------------------- in-process: who made a change

def _guard(text: str, path="student.py"):
    g = guard.Guard()
    g._torch = {"dir": str(Path(types.__file__).parent / "site-packages" / "torch") + "/"}
    g.set_student(path, text)
    return g


