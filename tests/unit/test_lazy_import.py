"""Top-level imports of plotting libraries are imported on first use (harness/child/lazy_import.py, loader.load)."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.child import lazy_import
from harness.child.loader import SubmissionError, load, read_source

ROOT = Path(__file__).resolve().parents[2]

FILE = textwrap.dedent("""\
    import math
    import matplotlib.pyplot as plt
    from matplotlib import cm as colours

    def plot_name():
        return plt.__name__, plt.plot.__module__

    def colour():
        return colours.__name__, sorted(colours.datad)[0]
    """)


def _fresh(code: str) -> dict:
    """Run `code` in a new interpreter (this one may have imported matplotlib already); its JSON output."""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _rewritten(code: str) -> str:
    tree = ast.parse(code)
    lazy_import.rewrite(tree)
    return ast.unparse(tree)


def test_what_is_rewritten_and_what_is_left_alone():
    assert "__mtxdiag_lazy__('matplotlib.pyplot'" in _rewritten("import matplotlib.pyplot as plt")
    assert _rewritten("import matplotlib.pyplot") == "matplotlib = __mtxdiag_lazy__('matplotlib', 'matplotlib.pyplot')"
    # a function, not a submodule; a star; a library outside the list; one not installed: as written
    for code in ("from matplotlib.pyplot import plot", "from matplotlib.pyplot import *", "import torch",
                 "import matplotlib.no_such_module as x", "import torch, matplotlib"):
        assert _rewritten(code) == code, code


def test_a_missing_submodule_still_fails_the_load(tmp_path):
    p = tmp_path / "student.py"
    p.write_text("import matplotlib.no_such_module as x\n\ndef f():\n    return 1\n")
    with pytest.raises(SubmissionError) as e:
        load(read_source(str(p), p.read_bytes()))
    assert e.value.kind == "missing-module" and e.value.line == 1


def test_the_stand_in_behaves_as_the_module():
    m = lazy_import.lazy("json")
    assert m.dumps([1]) == "[1]"
    assert "dumps" in dir(m)
    assert m.__name__ == "json"
