"""Where an lm interface problem is located (harness/child/probes/lm/where.py), on real torch exceptions."""
import torch
from torch import nn

from harness.child.probes.lm import where as lm_where


def _raised(fn):
    try:
        fn()
    except Exception as e:      # noqa: BLE001 - the exception is the test's input
        return e
    raise AssertionError("did not raise")


def test_missing_keys_name_the_attribute_each_key_belongs_to():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.out_proj = nn.Linear(2, 2, bias=False)
            self.scale = nn.Parameter(torch.ones(2))
    e = _raised(lambda: Block().load_state_dict({"output_proj.weight": torch.ones(2, 2), "scale": torch.ones(2)}))
    assert lm_where._missing_attributes(str(e)) == ["out_proj"]
    e = _raised(lambda: nn.Linear(2, 2).load_state_dict({"weight": torch.ones(2, 2)}))
    assert lm_where._missing_attributes(str(e)) == ["bias"]
    assert lm_where._missing_attributes("size mismatch for w2.weight: copying a param") == []


def test_the_definition_is_found_in_the_package_before_the_adapters(tmp_path):
    model, adapters = tmp_path / "model.py", tmp_path / "tests" / "adapters.py"
    adapters.parent.mkdir()
    adapters.write_text("class Helper:\n    def __init__(self):\n        self.out_proj = None\n")
    model.write_text("import torch\n\n\nclass Attn:\n    def __init__(self):\n        self.out_proj_scale = 1\n"
                     "        self.out_proj: torch.nn.Linear = make()\n        self.register_buffer('cos', x)\n")
    files = {str(adapters): "repo/tests/adapters.py", str(model): "repo/model.py"}
    assert lm_where._definition("out_proj", files) == {"file": "repo/model.py", "line": 7}
    assert lm_where._definition("cos", files) == {"file": "repo/model.py", "line": 8}
    assert lm_where._definition("missing", files) is None


def test_a_students_own_key_error_stays_where_it_was_raised(tmp_path):
    e = _raised(lambda: {}["output_proj.weight"])
    assert lm_where.interface_location(e, {__file__: "t.py"}) is None
    e = _raised(lambda: torch.ones(2) @ torch.ones(3))
    loc = lm_where.interface_location(e, {__file__: "t.py"})
    assert loc["file"] == "t.py" and loc["line"] == _raised.__code__.co_firstlineno + 2   # the outermost frame


def test_a_method_failing_on_what_the_adapter_built_is_located_where_it_was_built(tmp_path):
    src = tmp_path / "adapters.py"
    src.write_text("import torch\n\n\nclass Rot:\n    def __init__(self, theta, d):\n        self.d = d\n\n"
                   "    def __call__(self, x):\n        return x @ torch.ones(self.d, 2)\n\n\n"
                   "def run_rope(d, theta, x):\n    rope = Rot(d, theta)\n    y = 1\n    return rope(x)\n")
    ns = {}
    exec(compile(src.read_text(), str(src), "exec"), ns)
    e = _raised(lambda: ns["run_rope"](4, 10000.0, torch.ones(3, 4)))
    assert lm_where.interface_location(e, {str(src): "tests/adapters.py"}) == {"file": "tests/adapters.py",
                                                                              "line": 13}
