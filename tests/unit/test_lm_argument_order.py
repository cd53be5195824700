"""Arguments passed into another parameter's slot (issue 25, item 5: interface mismatches at the adapter):
read from an adapter written here and the callee's signature. In-process."""
from __future__ import annotations

import importlib
import sys

from harness.child.probes.lm.where import argument_order

SOURCE = '''class Model:
    def __init__(self, vocab_size, context_length, d_model, num_layers, rope_theta=None):
        pass


def run_model(vocab_size, context_length, d_model, num_layers, rope_theta):
    return Model(vocab_size, d_model, context_length, num_layers, rope_theta)


def run_model_by_keyword(vocab_size, context_length, d_model, num_layers, rope_theta):
    return Model(vocab_size, context_length=context_length, d_model=d_model, num_layers=num_layers)


def run_model_other_names(v, c, d, n, t):
    return Model(v, d, c, n, t)


class Block:
    def __init__(self, d_model, max_seq_len, theta):
        pass


def run_block(d_model, context_length, rope_theta):
    return Block(d_model, context_length, rope_theta), Block(d_model, rope_theta, context_length)
'''


def test_a_variable_in_another_parameters_slot_is_found_at_the_call(tmp_path):
    (tmp_path / "argorder_adapters.py").write_text(SOURCE)
    sys.path.insert(0, str(tmp_path))
    try:
        mod = importlib.import_module("argorder_adapters")
    finally:
        sys.path.remove(str(tmp_path))
    files = {str(tmp_path / "argorder_adapters.py"): "tests/adapters.py"}
    found = argument_order(mod.run_model, files)
    assert [(f["argument"], f["slot"], f["line"]) for f in found] == [("d_model", "context_length", 7),
                                                                       ("context_length", "d_model", 7)]
    assert argument_order(mod.run_model_by_keyword, files) == []
    assert argument_order(mod.run_model_other_names, files) == []      # no name to go by: nothing claimed
    assert argument_order(mod.run_model, {}) == []                     # not the student's file: not read
    # the course's names for the same hyperparameter (context_length is a max_seq_len, rope_theta a theta)
    assert [(f["argument"], f["slot"]) for f in argument_order(mod.run_block, files)] == [
        ("rope_theta", "max_seq_len"), ("context_length", "theta")]
