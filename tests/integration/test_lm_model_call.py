"""The student's TransformerLM as their adapter calls it (probes/lm/model_call.py), on repositories made from
submissions/lm_example with one change each:

  a forward that needs a keyword argument (token_positions)  the brief training calls it the same way: it trains
  blocks kept in a plain list                                 optimizer-missing-parameters, at the list's line
  a model called on the transposed input                      the training cannot be set up: check-not-measured,
                                                              never CLEAN
  a forward computed from copies of its weights               not trained (the copies would never change), said
                                                              why: check-not-measured, never training-fails

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
from harness.report.terminal import summary

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


def positions_repo(tmp_path: Path) -> Path:
    """lm_example whose model's forward needs token_positions=, which the adapter passes."""
    return repo(tmp_path, {
        "    def forward(self, token_ids):\n        x = self.token_embeddings":
            "    def forward(self, token_ids, *, token_positions):\n        x = self.token_embeddings",
        "            x = layer(x)\n": "            x = layer(x, token_positions)\n",
    }, {LM_CALL: "    positions = torch.arange(in_indices.shape[-1])\n"
                 "    return _loaded(lm, weights)(in_indices, token_positions=positions)"})


def test_a_model_whose_forward_needs_a_keyword_trains(tmp_path):
    path = positions_repo(tmp_path)
    r = check_file(path, assignment="lm")
    c = checks_of(r)
    assert c["lm-training"]["status"] == "pass", c["lm-training"]["detail"]
    assert c["lm-parameters"]["status"] == "pass", c["lm-parameters"]["detail"]
    assert r["verdict"] == "clean", [d["id"] for d in r["diagnoses"]]


def test_blocks_in_a_plain_list_are_optimizer_missing_parameters_at_the_list(tmp_path):
    path = repo(tmp_path, {
        "        self.layers = nn.ModuleList(\n": "        self.layers = [\n",
        "            for _ in range(num_layers))\n": "            for _ in range(num_layers)]\n",
    }, {LM_CALL: "    for i, layer in enumerate(lm.layers):        # not in lm's state_dict: loaded one by one\n"
                 "        p = f\"layers.{i}.\"\n"
                 "        layer.load_state_dict({k[len(p):]: v for k, v in weights.items() if k.startswith(p)})\n"
                 "    rest = {k: v for k, v in weights.items() if not k.startswith(\"layers.\")}\n"
                 "    return _loaded(lm, rest)(in_indices)"})
    line = next(i for i, t in enumerate((path / "cs336_basics/model.py").read_text().splitlines(), 1)
                if t.strip() == "self.layers = [")
    r = check_file(path, assignment="lm")
    c = checks_of(r)
    assert c["lm-lm"]["status"] == "pass"                  # the forward pass is right: the course's tests pass
    assert c["lm-parameters"]["status"] == "fail" and c["lm-parameters"]["measured"]["unregistered"] == 18
    ids = [d["id"] for d in r["diagnoses"]]
    assert ids == ["optimizer-missing-parameters"], ids    # the training's failure is its, not training-fails
    d = r["diagnoses"][0]
    assert d["component"] == "lm" and d["location"]["line"] == line
    assert d["location"]["file"].endswith("cs336_basics/model.py") and "ModuleList" in d["fix"]
    assert any(e.startswith("also explains lm-training") for e in d["evidence"])


def test_a_training_that_cannot_be_set_up_is_never_clean(tmp_path):
    path = repo(tmp_path, {"        x = self.token_embeddings(token_ids)": "        x = self.token_embeddings(token_ids.T)"},
                {LM_CALL: "    return _loaded(lm, weights)(in_indices.T.contiguous())   # the model takes (seq, batch)"})
    r = check_file(path, assignment="lm")
    c = checks_of(r)
    assert c["lm-lm"]["status"] == "pass"
    assert c["lm-training"]["status"] == "skip" and c["lm-training"]["data"]["could_not_measure"]
    assert r["verdict"] == "problems" and [d["id"] for d in r["diagnoses"]] == ["check-not-measured"]
    assert r["diagnoses"][0]["confidence"] < 0.5
    text = summary(r, color=False, width=None)
    assert "not measured lm-training: not trained: run_transformer_lm's model could not be found" in text
    assert "No problems found" not in text


FUNCTIONAL_LM = (
    "    x = weights[\"token_embeddings.weight\"][in_indices]          # computed from the weights themselves\n"
    "    for i in range(num_layers):\n"
    "        p = f\"layers.{i}.\"\n"
    "        block = TransformerBlock(d_model, num_heads, d_ff, context_length, rope_theta)\n"
    "        block.load_state_dict({k[len(p):]: v for k, v in weights.items() if k.startswith(p)})   # copies\n"
    "        x = block(x)\n"
    "    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weights[\"ln_final.weight\"]\n"
    "    return x @ weights[\"lm_head.weight\"].T")


def test_a_model_computed_from_copies_of_its_weights_is_not_trained_and_never_accused(tmp_path):
    # a correct forward that copies the blocks' weights into modules it builds (load_state_dict: out of the
    # gradient's reach) and computes the rest from the weights it is given: trained through it the blocks would
    # never change, so the curve would leave the reference's for that alone. Not measured, said why; never
    # training-fails at 0.85 on correct code
    path = repo(tmp_path, {}, {"    lm = TransformerLM(vocab_size, context_length, d_model, num_layers, num_heads, "
                               "d_ff, rope_theta)\n" + LM_CALL: FUNCTIONAL_LM})
    r = check_file(path, assignment="lm")
    c = checks_of(r)
    assert c["lm-lm"]["status"] == "pass"
    assert c["lm-training"]["status"] == "skip", c["lm-training"]["detail"]
    assert "copies of 18 of the 21 weights it is given (layers.0.ln1.weight" in c["lm-training"]["detail"]
    assert [d["id"] for d in r["diagnoses"]] == ["check-not-measured"] and r["diagnoses"][0]["confidence"] < 0.5


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
