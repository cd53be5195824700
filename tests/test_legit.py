"""A library's own behaviour is not the student's: legitimate torch usage is never reported as tampering.

tests/fixtures/legit/ holds complete, correct `reversal` files that use torch features which wrap or patch
things themselves (LR schedulers wrap Optimizer.step, torch.compile patches nn.Module, hooks, autocast,
checkpointing, parametrizations, GradScaler, seeding and thread settings inside train()). Each must come
back without `tampering` - and clean. The opposite side (real monkeypatching from the student's file is
still caught, with the student's line) is in tests/test_hostile.py.
"""
from __future__ import annotations

import types
from pathlib import Path

import pytest

from harness import guard, scan
from harness.api import check_file
from harness.runner import Limits

LEGIT = Path(__file__).resolve().parent / "fixtures" / "legit"
FILES = sorted(LEGIT.glob("legit_*.py"))
FAST = {"legit_adamw_lambdalr", "legit_onecycle_bf16"}     # the two the issue names run in the default suite


def test_the_corpus_is_there():
    names = {f.stem for f in FILES}
    assert FAST <= names and len(names) >= 7, names


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


def test_edit_sites_name_the_statement_that_patches():
    text = ("import torch\nimport builtins as _b\nfrom torch.optim import AdamW\n"
            "_b.len = len\n"                                  # 4
            "setattr(torch.Tensor, 'abs', None)\n"            # 5
            "vars(torch)['allclose'] = None\n"                # 6
            "AdamW.step = None\n"                             # 7
            "stats = {}\nstats['max'] = 1\n"                  # 9: a dict of the student's own
            "class M:\n    def f(self):\n        self.step = 0\n        setattr(self, 'zero_grad', 1)\n")
    s = scan.edit_sites(text)
    assert s.full == {"builtins.len": 4, "torch.Tensor.abs": 5, "torch.allclose": 6, "torch.optim.AdamW.step": 7}
    assert s.assigned == {}            # self.step, setattr(self, ...) and the student's own dict are theirs
    assert s.imported["AdamW"] == 3


def test_blame_students_code_and_torchs_own():
    import torch
    text = "import torch\ntorch.allclose = lambda *a, **k: True\n"
    g = _guard(text)
    g._torch = {"dir": str(Path(torch.__file__).parent) + "/"}
    ns = {}
    exec(compile("def mine(*a):\n    return 1\n", "student.py", "exec"), ns)
    # assigned in the text: the statement's line
    assert g.blame("allclose", ns["mine"], "replaced", "torch") == (True, 2)
    # code written in the student's file, assigned in a way the text scan cannot see: the definition's line
    assert g.blame("isfinite", ns["mine"], "replaced") == (True, 1)
    # torch's own wrapper (what Optimizer._patch_step_function puts on AdamW) and a flag dynamo adds
    wrapper = torch.optim.Optimizer.profile_hook_step(torch.optim.Adam.step)
    assert g.blame("step", wrapper, "added", "torch.optim.AdamW", torch.optim.Adam.step) == (False, None)
    # the student assigning another class's `step` says nothing about this one
    g2 = _guard("import torch\ntorch.optim.Adam.step = None\n")
    g2._torch = g._torch
    assert g2.blame("step", wrapper, "added", "torch.optim.AdamW", torch.optim.Adam.step) == (False, None)
    # a function of torch's own files that is not a wrapper of the recorded object: not torch's doing
    import torch._refs
    assert g.blame("isfinite", torch._refs.isreal, "replaced", "torch", torch.isfinite)[0] is True
    assert g.blame("step", wrapper, "added", "torch.optim.AdamW", torch.optim.SGD.step)[0] is True
    assert g.blame("___needs_generation_tag_patch", True, "added")[0] is False
    # code from neither torch nor the student's file (exec'd text, another library): counts as the student's
    exec(compile("def other(*a):\n    return 1\n", "<string>", "exec"), ns)
    assert g.blame("isfinite", ns["other"], "replaced")[0] is True
    assert g.blame("isfinite", None, "deleted")[0] is True
