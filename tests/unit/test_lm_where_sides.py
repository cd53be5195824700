"""Where an lm interface problem is fixed (issue 25, item 5), on small files written here: both sides of a
state-dict key mismatch with the adapter first, the module side when the adapter passes the course's names,
and a name bound to a submodule instead of the class. In-process: the files are imported, not sandboxed."""
from __future__ import annotations

import importlib
import sys

import pytest

from harness.child.probes.lm.where import interface_location, interface_sides, module_called

MODULE = '''class FFN:
    def __init__(self):
        self.{attr} = 1

    def load_state_dict(self, sd):
        raise RuntimeError('Error(s) in loading state_dict for FFN:\\n\\tMissing key(s) in state_dict: '
                           '"{attr}.weight". \\n\\tUnexpected key(s) in state_dict: "{passed}.weight". ')
'''
ADAPTER = '''from {pkg}.ffn import FFN


def run_ffn(w):
    ffn = FFN()
    weights = {{"{passed}.weight": w}}
    ffn.load_state_dict(weights)
    return ffn
'''


def _load(tmp_path, pkg, attr, passed):
    root = tmp_path / pkg
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "ffn.py").write_text(MODULE.format(attr=attr, passed=passed))
    (root / "adapters.py").write_text(ADAPTER.format(pkg=pkg, passed=passed))
    sys.path.insert(0, str(tmp_path))
    try:
        mod = importlib.import_module(f"{pkg}.adapters")
        with pytest.raises(RuntimeError) as e:
            mod.run_ffn(0)
    finally:
        sys.path.remove(str(tmp_path))
    files = {str(root / "ffn.py"): f"{pkg}/ffn.py", str(root / "adapters.py"): f"{pkg}/adapters.py"}
    return e.value, files


def test_a_key_the_student_typed_in_the_adapter_is_located_at_the_adapter_with_the_attribute_as_context(tmp_path):
    exc, files = _load(tmp_path, "pkg_typed_key", "w1_weights", "w1_weight")
    sides = interface_sides(exc, files)
    assert sides == {"adapter": {"file": "pkg_typed_key/adapters.py", "line": 6},
                     "module": {"file": "pkg_typed_key/ffn.py", "line": 3}}
    assert interface_location(exc, files) == sides["adapter"]


def test_the_course_key_passed_to_a_module_that_names_it_otherwise_is_located_at_the_module(tmp_path):
    exc, files = _load(tmp_path, "pkg_renamed_attr", "out_proj", "output_proj")
    assert interface_location(exc, files) == {"file": "pkg_renamed_attr/ffn.py", "line": 3}


def test_a_name_bound_to_a_submodule_is_located_at_the_packages_init(tmp_path):
    root = tmp_path / "pkg_sub" / "nn"
    root.mkdir(parents=True)
    (tmp_path / "pkg_sub" / "__init__.py").write_text("")
    (root / "__init__.py").write_text("import math\nfrom .Linear import Linear\n")
    (root / "Linear.py").write_text("class Linear:\n    pass\n")
    (root / "Embedding.py").write_text("class Embedding:\n    pass\n")
    (tmp_path / "pkg_sub" / "adapters.py").write_text(
        "from pkg_sub.nn import Linear\nfrom pkg_sub.nn import Embedding\n\n\ndef run_embedding():\n"
        "    return Embedding()\n")
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module("pkg_sub.nn.Embedding")    # what `from pkg_sub.nn import Embedding` falls back to
        mod = importlib.import_module("pkg_sub.adapters")
        with pytest.raises(TypeError) as e:
            mod.run_embedding()
    finally:
        sys.path.remove(str(tmp_path))
    files = {str(root / "__init__.py"): "pkg_sub/nn/__init__.py",
             str(tmp_path / "pkg_sub" / "adapters.py"): "pkg_sub/adapters.py"}
    found = module_called(e.value, files)
    assert found["file"] == "pkg_sub/nn/__init__.py" and found["line"] == 2
    assert found["module"] == "pkg_sub.nn.Embedding" and found["called_at"] == {"file": "pkg_sub/adapters.py",
                                                                               "line": 6}


def test_other_type_errors_are_not_taken_for_a_submodule():
    try:
        len(5)
    except TypeError as e:
        assert module_called(e, {}) is None
