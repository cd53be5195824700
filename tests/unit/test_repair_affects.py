"""repair/affects.py: an edit of a signature's default or of a top-level constant counts where its value is read,
so a repair's re-check does not re-run the whole suite for it; anything that runs while the file loads still does."""
from __future__ import annotations

import ast

from harness import reached
from harness.repair.affects import effect_lines
from harness.repair.verify import edited_lines

SRC = '''\
import math

LR = 1e-6
WIDTH: int = 4
SCALE = 2.0
Y = SCALE + 1


class Model:
    size = WIDTH

    def forward(self, x):
        return x * LR


def train(model, steps=30, lr=1e-6,
          warmup=400):
    """Doc."""
    return model.forward(lr)


def unused():
    return 0
'''
BODY = {"Model.forward": 13, "train": 18}      # first body line of each function (train's is its docstring)


def _lines(old: str, new: str) -> set[int]:
    src = SRC.replace(old, new)
    return effect_lines(SRC, src, edited_lines(SRC, src))


def test_a_default_counts_as_an_edit_of_its_function():
    assert _lines("lr=1e-6,", "lr=1e-3,") == {BODY["train"]}
    assert _lines("warmup=400)", "warmup=0)") == {BODY["train"]}       # the signature's second line


def test_a_signature_whose_parameters_change_keeps_its_line():
    """Probes read the parameters (which arguments to pass) without calling: a new one is no body edit."""
    assert _lines("lr=1e-6,", "lr=1e-6, mask=None,") == {16}
    assert _lines("steps=30, lr=1e-6,", "steps, lr=1e-6,") == {16}


def test_a_constant_counts_where_functions_read_it():
    assert _lines("LR = 1e-6", "LR = 1e-3") == {BODY["Model.forward"]}


def test_a_constant_read_while_the_file_loads_keeps_its_line():
    assert _lines("SCALE = 2.0", "SCALE = 3.0") == {5}          # Y = SCALE + 1 at the top level
    assert _lines("WIDTH: int = 4", "WIDTH: int = 8") == {4}    # a class body reads it


def test_a_call_keeps_the_line_it_could_run_anything_at_load():
    assert _lines("LR = 1e-6", "LR = float('1e-3')") == {3}
    assert _lines("lr=1e-6,", "lr=math.exp(-7),") == {16}


def test_an_edit_in_a_body_is_left_as_it_is_and_bad_text_changes_nothing():
    assert _lines("return 0", "return 1") == {23}
    assert effect_lines(SRC, "def (", {3}) == {3}


def test_with_the_record_a_default_edit_reruns_only_the_probes_that_called_the_function():
    r = reached.Reach(True)
    code = r.compile(ast.parse(SRC), "s.py")
    ns: dict = {}
    with r.during(reached.LOAD):
        exec(code, ns)
    with r.during("train-trace"):
        ns["train"](ns["Model"]())
    with r.during("unused"):
        ns["unused"]()
    cov = reached.clean(r.record())
    probes = {"train-trace", "unused"}
    new = SRC.replace("lr=1e-6,", "lr=1e-3,")
    assert reached.to_rerun(cov, edited_lines(SRC, new), probes) is None                 # the line alone: all
    assert reached.to_rerun(cov, _lines("lr=1e-6,", "lr=1e-3,"), probes) == {"train-trace"}
    assert reached.to_rerun(cov, _lines("LR = 1e-6", "LR = 1e-3"), probes) == {"train-trace"}   # via forward
