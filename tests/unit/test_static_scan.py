"""The static scan of a submission's text (in-process); hostile submissions in the sandbox: tests/integration/test_hostile.py."""
from __future__ import annotations


from test_hostile import REFERENCE, ROOT  # noqa: F401, F811 (fixtures, helpers)


def test_static_scan_flags_grader_access_and_not_lesson_code():
    from harness.scan import scan_source
    hits = scan_source("import torch\nimport torch.nn.functional as F\nimport harness.child.main\n"
                       "F.softmax = lambda x, dim: x\nsetattr(torch.Tensor, 'abs', None)\n"
                       "x = open('/proc/self/fd')\nimport ctypes\nctypes.CDLL(None)\n")
    whats = " | ".join(h["what"] for h in hits)
    for part in ("imports the grader", "assigns torch.nn.functional.softmax", "setattr() on torch.Tensor",
                 "reads /proc", "imports ctypes"):
        assert part in whats
    for f in [REFERENCE, *sorted((ROOT / "tests" / "fixtures" / "correct").glob("*.py"))]:
        assert scan_source(f.read_text()) == [], f
    assert scan_source("import torch\ntorch.backends.cudnn.deterministic = True\n") == []


def test_a_native_import_the_file_never_reads_is_not_tampering():
    """An editor's stray auto-import (`from ctypes import alignment`, seen in correct CS231n forks) reaches nothing;
    one whose names are read is flagged, and a native call is recorded at run time whatever the scan says."""
    from harness.scan import scan_source
    for stray in ("from ctypes import alignment\nimport torch\n", "from cffi.model import attach_exception_info\n",
                  "import ctypes\nx = 1\n"):
        assert scan_source(stray) == [], stray
    for used in ("import ctypes\nctypes.CDLL(None)\n", "from ctypes import CDLL\nCDLL(None)\n",
                 "import ctypes as c\nlib = c\n", "from ctypes import *\n", "import cffi\nffi = cffi.FFI()\n"):
        assert [h["what"] for h in scan_source(used)] in (["imports ctypes"], ["imports cffi"]), used
    assert scan_source("import harness\n") != []          # the grader's modules: always
