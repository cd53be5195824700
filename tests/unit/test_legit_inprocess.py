"""Legitimate torch usage: the corpus, edit sites and blame in-process; through real checks: tests/integration/test_legit.py."""
from __future__ import annotations

from pathlib import Path
from harness import scan

from test_legit import FAST, FILES, _guard  # noqa: F401, F811 (fixtures, helpers)


def test_the_corpus_is_there():
    names = {f.stem for f in FILES}
    assert FAST <= names and len(names) >= 7, names


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
