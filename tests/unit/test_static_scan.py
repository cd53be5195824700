"""The static scan of a submission's text (in-process); hostile submissions in the sandbox: tests/integration/test_hostile.py."""
from __future__ import annotations


from test_hostile import REFERENCE, ROOT  # noqa: F401, F811 (fixtures, helpers)


def test_static_scan_flags_grader_access_and_not_lesson_code():
    from harness.scan import scan_source
    hits = scan_source("import torch\nimport torch.nn.functional as F\nimport harness.child.main\n"
                       "F.softmax = lambda x, dim: x\nsetattr(torch.Tensor, 'abs', None)\n"
                       "x = open('/proc/self/fd')\nimport ctypes\n")
    whats = " | ".join(h["what"] for h in hits)
    for part in ("imports the grader", "assigns torch.nn.functional.softmax", "setattr() on torch.Tensor",
                 "reads /proc", "imports ctypes"):
        assert part in whats
    for f in [REFERENCE, *sorted((ROOT / "tests" / "fixtures" / "correct").glob("*.py"))]:
        assert scan_source(f.read_text()) == [], f
    assert scan_source("import torch\ntorch.backends.cudnn.deterministic = True\n") == []
