"""Every harness module imports on its own in a fresh interpreter, and the parent's path stays torch-free (each in a new process); the import graph's structure in-process: tests/unit/test_imports.py."""
from __future__ import annotations

import json
import subprocess
import sys

from test_imports import ROOT, modules  # noqa: F401, F811 (fixtures, helpers)


def test_every_module_imports_in_a_fresh_interpreter():
    """Each module first, on its own: the harness is forgotten before each one (torch stays loaded: it is not
    ours, and importing it 60 times would take minutes)."""
    names = [n for n in modules() if not n.endswith("__main__")]
    code = ("import importlib, json, sys, traceback\n"
            "bad = {}\n"
            f"for n in {names!r}:\n"
            "    for k in [k for k in sys.modules if k == 'harness' or k.startswith('harness.')]:\n"
            "        del sys.modules[k]\n"
            "    try:\n"
            "        importlib.import_module(n)\n"
            "    except BaseException:\n"
            "        bad[n] = traceback.format_exc(limit=3)\n"
            "print(json.dumps(bad))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {}


def test_the_parent_path_does_not_import_torch():
    """The parent only reads the child's result and applies the rules: torch (~1.3 s to import) is the child's.
    A fresh interpreter, so that nothing imported before hides an import."""
    code = ("import harness.cli.main, harness.api, harness.engine, harness.causes, harness.report.terminal\n"
            "import harness.report.html\n"
            "import harness.repair.run, harness.repair.show, harness.grading.gradescope\n"
            "import sys\n"
            "assert 'torch' not in sys.modules, 'torch imported by the parent path'\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
