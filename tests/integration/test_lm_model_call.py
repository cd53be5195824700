"""The student's TransformerLM as their adapter calls it (probes/lm/model_call.py), on repositories made from
submissions/lm_example with one change each:

  a forward that needs a keyword argument (token_positions)  the brief training calls it the same way: it trains

and in-process, the recorded call keeps every argument the adapter gave (a RoPE module, keywords)."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import torch

from harness.api import check_file
from harness.child import lm_loader
from harness.child.probes.lm.model_call import capture, the_model

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "submissions" / "lm_example"
LM_CALL = "    return _loaded(lm, weights)(in_indices)"


def repo(tmp_path: Path, model: dict, adapters: dict) -> Path:
    """lm_example copied, with each (old -> new) of model.py and tests/adapters.py made (each must be there)."""
    out = tmp_path / "repo"
    shutil.copytree(EXAMPLE, out)
    for rel, edits in (("cs336_basics/model.py", model), ("tests/adapters.py", adapters)):
        p = out / rel
        text = p.read_text()
        for old, new in edits.items():
            assert text.count(old) == 1, f"{rel}: {old!r} is not once in lm_example"
            text = text.replace(old, new)
        p.write_text(text)
    return out


def checks_of(result: dict) -> dict:
    return {c["id"]: c for c in result["checks"]}


def test_a_model_whose_forward_needs_a_keyword_trains(tmp_path):
    path = repo(tmp_path, {
        "    def forward(self, token_ids):\n        x = self.token_embeddings":
            "    def forward(self, token_ids, *, token_positions):\n        x = self.token_embeddings",
        "            x = layer(x)\n": "            x = layer(x, token_positions)\n",
    }, {LM_CALL: "    positions = torch.arange(in_indices.shape[-1])\n"
                 "    return _loaded(lm, weights)(in_indices, token_positions=positions)"})
    r = check_file(path, assignment="lm")
    c = checks_of(r)
    assert c["lm-training"]["status"] == "pass", c["lm-training"]["detail"]
    assert r["verdict"] == "clean", [d["id"] for d in r["diagnoses"]]


class Rope(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("angle", torch.linspace(0, 1, 8))

    def forward(self, h, positions):
        return h * torch.cos(self.angle[positions])[..., None]


class Block(torch.nn.Module):        # more parameters than the model's own: the outermost module is the model
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Linear(4, 4)

    def forward(self, h):
        return self.w(h)


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Parameter(torch.randn(10, 4))
        self.block = Block()

    def forward(self, x, rope, *, token_positions, scale=1.0, **extra):
        return self.block(rope(self.emb[x], token_positions)) * scale + extra["shift"]


def adapter(x):
    m, rope = Tiny(), Rope()
    return m(x, rope, token_positions=torch.arange(x.shape[-1]), scale=2.0, shift=0.5), m, rope


def test_the_recorded_call_keeps_every_argument_and_replaces_only_the_input(monkeypatch):
    monkeypatch.setitem(lm_loader.STATE.files, __file__, "test_lm_model_call.py")
    torch.manual_seed(0)
    x0 = torch.randint(0, 10, (2, 5))
    (out, m, rope), calls = capture(adapter, (x0,))
    call = the_model(out, calls, x0)
    assert call is not None and call.module is m and call.at == 0
    assert call.others() == ["rope", "token_positions", "scale", "shift"]
    x1 = torch.randint(0, 10, (2, 5))
    want = m(x1, rope, token_positions=torch.arange(5), scale=2.0, shift=0.5)
    assert torch.equal(call(x1), want) and not torch.equal(call(x1), call(x0))
    # the same tensor as the input, or one equal to it: a copy the adapter made
    (out, *_), calls = capture(lambda x: adapter(x.clone()), (x0,))
    assert the_model(out, calls, x0) is not None


@pytest.fixture(autouse=True)
def one_thread():
    was = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(was)
    sys.settrace(None)
