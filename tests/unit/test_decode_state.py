"""State a decode call leaves on the model (probes/properties._kept_state): a cache grown in place is seen
two levels into its containers; weights, buffers and the train flag are not state; the assignment that put
it there is found outside __init__ (locate.attribute_assignment)."""
from __future__ import annotations

import ast
import types

import torch

from harness.child.probes import locate
from harness.child.probes.properties import _kept_state


def test_a_cache_that_grows_in_place_is_state_kept_between_calls():
    m = torch.nn.Sequential(torch.nn.Linear(2, 2))
    before = _kept_state(m)
    m.kv = [dict() for _ in range(2)]                   # set by the first call
    after1 = _kept_state(m)
    m.kv[0]["k"] = torch.zeros(1, 3)                   # grown by the next, in place
    after2 = _kept_state(m)
    assert [k for k in after1 if after1[k] != before.get(k)] == ["kv"]
    assert [k for k in after2 if after2[k] != after1.get(k)] == ["kv"]
    with torch.no_grad():
        m[0].weight.add_(1)                            # weights change in place: not state
    m.eval()
    assert _kept_state(m) == after2


def test_the_assignment_outside_init_is_located():
    text = ("class M:\n    def __init__(self):\n        self.kv = None\n\n"
            "def decode(model):\n    if not hasattr(model, 'kv'):\n        model.kv = []\n    return model.kv\n")
    ctx = types.SimpleNamespace(source=types.SimpleNamespace(text=text))
    assert ast.parse(text) and locate.attribute_assignment(ctx, "kv") == 7
    assert locate.attribute_assignment(ctx, "other") is None
