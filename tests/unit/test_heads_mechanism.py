"""heads-split-wrong needs its mechanism (issue 48): a reshape of the attention's forward pass that puts a token's
values at another token, measured by replaying the student's reshapes on token indices. A failed permutation
check alone (a random forward pass, an online softmax that does not rescale its earlier blocks) is the symptom
only; a random pass is named by its random op (dropout-at-inference when it is a dropout, fused or not)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness import engine
from harness.child.loader import load, read_source
from harness.child.probes import attention, block_wiring, heads_layout, properties
from harness.child.probes.base import Context
from mutants import get, source

ROOT = Path(__file__).resolve().parents[2]
BUGS = ROOT / "tests" / "corpus" / "reversal" / "bugs"


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _ctx(text: str, name: str, assignment: str = "reversal") -> Context:
    src = read_source(f"{name}.py", text.encode())
    return Context(load(src, module_name=f"heads_mech_{name.replace('-', '_')}"), src, assignment)


def _line(text: str, needle: str) -> int:
    return next(i for i, s in enumerate(text.splitlines(), 1) if needle in s)


def _diagnose(assignment: str, *checks) -> list[dict]:
    return engine.diagnose({"assignment": assignment, "checks": list(checks), "submission": "f.py"})


# -- the measurement: reshapes replayed on token indices ------------------------------------------------------

def _split_merge(x, right: bool):
    B, T, D = x.shape
    h = 4
    if right:
        q = x.view(B, T, h, D // h).transpose(1, 2)                    # (B, h, T, d_k)
        return q.transpose(1, 2).contiguous().view(B, T, D)
    q = x.view(B, h, T, D // h)                                        # cuts several tokens into each head
    return q.reshape(B, T, D)


@pytest.mark.parametrize("right,kind", [(True, "positions-kept"), (False, "positions-mixed")])
def test_reshapes_replayed_on_token_indices(right, kind):
    rec = heads_layout.recorder(__file__)
    with rec:
        _split_merge(torch.randn(2, 7, 64), right)
    m = heads_layout.positions(rec, 7)
    assert m["kind"] == kind, m
    if not right:
        assert m["line"] == _line(Path(__file__).read_text(), "q = x.view(B, h, T, D // h)")
        assert 0.5 < m["moved"] <= 1.0 and m["in_shape"] == [2, 7, 64] and m["out_shape"] == [2, 4, 7, 16]


def test_a_reshape_with_no_single_token_axis_is_not_judged():
    rec = heads_layout.recorder(__file__)
    with rec:
        torch.randn(2, 7, 64).reshape(14, 64)                          # tokens folded into the batch
    assert heads_layout.positions(rec, 7)["kind"] == "unobserved"


# -- reversal ----------------------------------------------------------------------------------------------

def test_the_heads_split_mutant_is_named_with_its_reshape():
    text = source(get("reversal-heads-split-wrong"))
    [c] = attention.head_permutation(_ctx(text, "rev_heads"))
    mech = c["data"]["mechanism"]
    assert c["status"] == "fail" and mech["kind"] == "positions-mixed"
    assert c["location"]["line"] == mech["line"] == _line(text, "return x.view(B, self.h, T, self.d_k)")
    [d] = _diagnose("reversal", c)
    assert d["id"] == "heads-split-wrong" and d["confidence"] >= 0.8 and "mechanism: the view" in d["evidence"][1]


def test_an_online_softmax_without_the_rescale_is_not_a_head_split():
    text = (BUGS / "online_softmax_not_rescaled.py").read_text()
    [c] = attention.head_permutation(_ctx(text, "online"))
    assert c["status"] == "fail" and c["data"]["mechanism"]["kind"] == "positions-kept"
    assert c["data"]["mechanism"]["judged"] >= 4          # q, k, v split and the merge, all measured
    d = _diagnose("reversal", c)
    assert [x["id"] for x in d] == ["unexplained-failure"] and d[0]["confidence"] < 0.5


def test_the_corrected_online_softmax_passes():
    text = (BUGS / "online_softmax_not_rescaled.py").read_text()
    fixed = text.replace("acc = acc + p @ v_blk", "acc = acc * alpha.unsqueeze(-1) + p @ v_blk")
    assert fixed != text
    [c] = attention.head_permutation(_ctx(fixed, "online_fixed"))
    assert c["status"] == "pass", c


def test_sdpa_dropout_p_in_eval_is_dropout_at_inference_at_its_call():
    text = (BUGS / "sdpa_dropout_p_always.py").read_text()
    ctx = _ctx(text, "sdpa_drop")
    line = _line(text, "dropout_p=self.attn_pdrop)")
    [perm] = attention.head_permutation(ctx)
    mech = perm["data"]["mechanism"]
    assert perm["status"] == "fail" and (mech["kind"], mech["draw"], mech["fused"]) == ("random", "dropout", True)
    assert perm["location"]["line"] == line
    [det] = properties.determinism(ctx)
    assert det["status"] == "fail" and det["data"]["mechanism"]["kind"] == "dropout" and det["location"]["line"] == line
    d = _diagnose("reversal", det, perm)
    assert d[0]["id"] == "dropout-at-inference" and d[0]["confidence"] >= 0.8 and d[0]["location"]["line"] == line
    assert "if self.training else 0.0" in d[0]["fix"]
    assert "heads-split-wrong" not in [x["id"] for x in d]
    # the permutation failure alone (no eval-determinism check) still names no head split
    assert "heads-split-wrong" not in [x["id"] for x in _diagnose("reversal", perm)]


def test_a_permutation_failure_without_a_measured_layout_stays_below_the_bar():
    c = {"id": "heads-permutation", "status": "fail", "measured": 0.3, "expected": "", "detail": "", "data": {},
         "location": {"file": "f.py", "line": 5}}
    [d] = _diagnose("reversal", c)
    assert d["id"] == "heads-split-wrong" and d["confidence"] < 0.8 and "not measured" in d["title"]


# -- block -------------------------------------------------------------------------------------------------

def test_block_heads_mutant_keeps_its_line_and_mechanism():
    text = source(get("block-heads-split-wrong"))
    [c] = block_wiring.permutation(_ctx(text, "blk_heads", "block"))
    assert c["data"]["mechanism"]["kind"] == "positions-mixed" and c["data"]["measured_on"] == "MultiHeadAttention"
    assert c["location"]["line"] == _line(text, "out = out.reshape(seq_len, d_model)")
    assert _diagnose("block", c)[0]["id"] == "heads-split-wrong"


def test_block_dropout_in_eval_is_not_a_head_split():
    text = source(get("block-dropout-at-inference"))
    [c] = block_wiring.permutation(_ctx(text, "blk_drop", "block"))
    mech = c["data"]["mechanism"]
    assert c["status"] == "fail" and (mech["kind"], mech["draw"], mech["op"]) == ("random", "dropout", "dropout")
    assert c["location"]["line"] == _line(text, "weights = F.dropout(")
    causal = {"id": "block-causal", "status": "fail", "measured": {"future_change": 0.6}, "expected": "", "detail": "",
              "data": {}, "location": None}         # a comparison of two passes of a random block: no evidence
    d = _diagnose("block", c, causal)
    assert [x["id"] for x in d] == ["dropout-at-inference"] and d[0]["confidence"] >= 0.8
    assert d[0]["evidence"][-1].startswith("also unreliable (the forward pass is random): block-causal:")
