"""Rules judge mechanisms, not symptoms alone: in-process tests on synthetic payloads and recorded ops.

- a cause at >= 0.8 needs its mechanism observed; a symptom alone goes to the catch-all (< 0.5) with where
  it starts;
- a measurement that failed (None, NaN, could not measure) is never evidence for a cause;
- an independent second bug is not swallowed by the first cause's `explains`;
- a random forward pass makes comparisons unreliable, but not unrelated checks.
"""
from __future__ import annotations

import torch

from harness import engine
from harness.checks import BY_ID as DECLARED_CHECKS, known_ids
from harness.child.probes import PROBES, mechanism, trace
from harness.child.probes.trace import Op


def _check(id, status, measured=None, data=None, location=None):
    return {"id": id, "status": status, "measured": measured, "expected": "", "detail": "", "data": data or {},
            "location": location}


def _ids(checks):
    return [(d["id"], d["confidence"]) for d in engine.diagnose({"assignment": "reversal", "checks": checks,
                                                                 "submission": "f.py"})]


def test_a_leak_without_its_mechanism_is_not_a_mask_bug():
    ids = _ids([_check("causal-leak", "fail", 0.4, {"past_fraction": 1.0,
                                                    "mechanism": {"kind": "elsewhere", "text": "weights are 0"},
                                                    "divergence": {"line": 61, "text": "from line 61 on"}},
                       location={"file": "f.py", "line": 61})])
    assert ids == [("unexplained-failure", 0.45)]


def test_a_leak_with_its_mechanism_is_named():
    mech = {"kind": "missing", "text": "no causal masking reaches the decoder self-attention"}
    assert _ids([_check("causal-leak", "fail", 0.4, {"mechanism": mech})])[0] == ("causal-mask-missing", 0.85)
    mech = {"kind": "renormalised", "text": "not the softmax of the masked scores"}
    assert _ids([_check("causal-leak", "fail", 0.4, {"mechanism": mech})])[0][0] == "attention-renormalised"
    mech = {"kind": "after-softmax", "text": "mask applied to the softmax's output"}
    assert _ids([_check("causal-leak", "fail", 0.4, {"mechanism": mech})])[0][0] == "mask-after-softmax"


def test_a_measurement_that_failed_is_no_evidence():
    # measured None: the old engine named causal-mask-inverted from this at 0.9
    mech = {"kind": "inverted", "text": "x"}
    ids = _ids([_check("causal-leak", "fail", None, {"past_fraction": 0.0, "mechanism": mech})])
    assert ids and all(i == "unexplained-failure" and c < 0.5 for i, c in ids)
    nan = _check("causal-leak", "error", None, {"could_not_measure": "non-finite logits",
                                                "divergence": {"line": 12, "text": "NaN from line 12 on"}},
                 location={"file": "f.py", "line": 12})
    d = engine.diagnose({"assignment": "reversal", "checks": [nan], "submission": "f.py"})
    assert [x["id"] for x in d] == ["unexplained-failure"]            # not forward-error
    assert d[0]["location"]["line"] == 12 and "could not be measured" in d[0]["title"]


def test_softmax_axis_needs_the_key_axis_confirmed():
    over_q = {"key_axis": {"over_keys_err": 1.4, "over_queries_err": 0.0}}
    assert _ids([_check("attn-rows-sum", "fail", 1.4, over_q)])[0] == ("softmax-wrong-dim", 0.95)
    neither = {"key_axis": {"over_keys_err": 0.6, "over_queries_err": 4.2}}
    assert _ids([_check("attn-rows-sum", "fail", 0.6, neither)])[0][0] == "unexplained-failure"
    assumed = {"softmax_dims": [-2], "layout_assumed": True}
    assert _ids([_check("attn-rows-sum", "fail", 0.6, assumed)])[0] == ("softmax-wrong-dim", 0.7)


def test_an_independent_second_bug_is_not_swallowed():
    over_q = {"key_axis": {"over_keys_err": 1.4, "over_queries_err": 0.0}}
    grads = {"mechanism": {"kind": "accumulates", "text": "earlier gradients still in .grad"}}
    ids = {i for i, _ in _ids([_check("attn-rows-sum", "fail", 1.4, over_q),
                               _check("causal-leak", "fail", 0.3, {"mechanism": {"kind": "missing", "text": "x"}}),
                               _check("train-zero-grad", "fail", 0.4, grads)])}
    assert ids == {"softmax-wrong-dim", "gradients-not-zeroed"}       # the leak folds into the softmax axis


def test_a_random_forward_pass_folds_comparisons_but_not_unrelated_bugs():
    det = _check("eval-determinism", "fail", 0.25, {"mechanism": {"kind": "dropout", "text": "F.dropout active"}},
                 location={"file": "f.py", "line": 83})
    ids = [i for i, _ in _ids([det, _check("stateless-forward", "fail", 1.0),
                               _check("heads-permutation", "fail", 0.2),
                               _check("train-shift", "fail", {"label_equals_input": 1.0})])]
    assert ids == ["target-not-shifted", "dropout-at-inference"]


def test_a_component_that_differs_from_the_contract_is_not_a_crash():
    checks = [_check("shapes", "pass", [2, 6, 13]),
              _check("residual", "error", {"exception": "RuntimeError", "message": "size mismatch"})]
    result = {"assignment": "reversal", "checks": checks, "submission": "f.py"}
    d = engine.diagnose(result)
    assert [x["id"] for x in d] == ["contract-deviation"] and d[0]["severity"] == "info"
    assert engine.verdict(d) == "clean"
    checks[0]["status"] = "fail"                     # the model itself does not run: a real error
    assert "forward-error" in [x["id"] for x in engine.diagnose(result)]


def test_failures_starting_at_one_op_are_one_finding():
    div = {"line": 113, "text": "from line 113 on"}
    ids = _ids([_check("batch-independence", "fail", 0.4, {"divergence": div}, {"file": "f.py", "line": 113}),
                _check("padding-invariance", "error", None, {"could_not_measure": "NaN", "divergence": div},
                       {"file": "f.py", "line": 113})])
    assert ids == [("unexplained-failure", 0.45)]


def test_every_probe_declares_its_checks():
    from harness.assignments import BLOCK
    from harness.child.probes import select
    for p in PROBES + tuple(select(BLOCK.name, False)):      # block's probes: its pack's own (block_plan.py)
        assert p.id in known_ids(), f"probe {p.id} is not declared in harness/checks.py"
    for c in DECLARED_CHECKS.values():
        assert c.measures and c.threshold, c.id


# -- the mechanisms themselves, on recorded ops --------------------------------------------------------------
def _softmax_op(scores, index=0, line=10):
    return Op("softmax", line, [torch.softmax(scores, -1)], index, ins=[scores])


def _apply_op(w, index, line=11):
    v = torch.randn(w.size(0), w.size(-1), 4)
    return Op("matmul", line, [w @ v], index, ins=[w, v])


def test_causal_mechanism_kinds():
    t = 5
    s = torch.randn(2, t, t)
    masked = s.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), -1e9)
    sm = _softmax_op(masked, 0)
    assert mechanism.causal_mechanism([sm, _apply_op(sm.outs[0], 1)], t)["kind"] == "elsewhere"
    sm2 = Op("softmax", 11, [torch.softmax(sm.outs[0], -1)], 1, ins=[sm.outs[0]])      # double softmax
    m = mechanism.causal_mechanism([sm, sm2, _apply_op(sm2.outs[0], 2, line=12)], t)
    assert m["kind"] == "renormalised" and m["line"] == 11
    raw = _softmax_op(s, 0)
    assert mechanism.causal_mechanism([raw, _apply_op(raw.outs[0], 1)], t)["kind"] == "missing"
    fill = Op("masked_fill", 11, [raw.outs[0].masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), 0.0)], 1,
              ins=[raw.outs[0]])
    m = mechanism.causal_mechanism([raw, fill, _apply_op(fill.outs[0], 2, line=12)], t)
    assert m["kind"] == "after-softmax" and m["line"] == 11
    inv = _softmax_op(s.masked_fill(~torch.ones(t, t, dtype=torch.bool).triu(), -1e9), 0)
    assert mechanism.causal_mechanism([inv, _apply_op(inv.outs[0], 1)], t)["kind"] == "inverted"
    # True = blocked, torch.triu without diagonal=1: each position loses itself, row 0 loses everything
    diag = _softmax_op(s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(), -1e9), 0)
    assert mechanism.causal_mechanism([diag, _apply_op(diag.outs[0], 1)], t)["kind"] == "diagonal-masked"
    # a padding mask that allows only PAD, ANDed with the triangle: unpadded rows allow no key at all
    none = _softmax_op(s.masked_fill(torch.ones(t, t, dtype=torch.bool), -1e9), 0)
    assert mechanism.causal_mechanism([none, _apply_op(none.outs[0], 1)], t)["kind"] == "no-key-allowed"
    nxt = _softmax_op(s.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(1), -1e9), 0)
    assert mechanism.causal_mechanism([nxt, _apply_op(nxt.outs[0], 1)], t)["kind"] == "off-by-one"


def test_a_mask_that_allows_no_key_is_the_padding_mask_not_a_missing_triangle():
    leak = _check("causal-leak", "fail", 0.29, {"mechanism": {"kind": "no-key-allowed", "text": "rows uniform"}})
    pad = _check("padding-invariance", "fail", 2.3, {"mechanism": {"kind": "inverted", "text": "PAD gets 100%",
                                                                  "t_q": 10, "t_k": 10}})
    assert _ids([leak, pad]) == [("padding-mask-inverted", 0.85)]
    assert [i for i, _ in _ids([leak])] == ["unexplained-failure"]   # no mechanism names a cause alone
    diag = _check("causal-leak", "fail", 0.42, {"mechanism": {"kind": "diagonal-masked", "text": "x"}})
    assert _ids([diag]) == [("causal-diagonal-masked", 0.85)]
    grads = _check("gradient-flow", "fail", {"params_without_grad": 4}, {"dead": ["w_q"], "detach_lines": []})
    assert _ids([grads]) == [("no-gradient-flow", 0.45)]          # the symptom, no cut seen: below 0.5
    grads["data"]["detach_lines"] = [176]
    assert _ids([grads]) == [("no-gradient-flow", 0.9)]


def test_first_divergence_finds_the_first_op_that_breaks_the_property():
    t, j = 6, 3
    a = [Op("embedding", 1, [torch.randn(1, t, 8)], 0), Op("mean", 2, [torch.randn(1, t, 8)], 1)]
    b = [Op("embedding", 1, [a[0].outs[0].clone()], 0), Op("mean", 2, [a[1].outs[0].clone()], 1)]
    b[0].outs[0][:, j:] += 1.0                      # later positions change: allowed
    assert trace.first_divergence(a, b, trace.prefix_unchanged(t, j)) is None
    b[1].outs[0][:, 0] += 1.0                       # an earlier position changes at op 2
    assert trace.first_divergence(a, b, trace.prefix_unchanged(t, j)).line == 2
    a = [Op("linear", 1, [torch.randn(3, t, 8)], 0), Op("mean", 2, [torch.randn(3, t, 8)], 1)]
    b = [Op(o.name, o.line, [o.outs[0].clone()], o.index) for o in a]
    b[0].outs[0][1:] += 1.0                         # the other samples change: allowed
    assert trace.first_divergence(a, b, trace.sample_unchanged(3)) is None
    b[1].outs[0][0, 2] += 1.0                       # sample 0 changes at op 2 (a statistic over the batch)
    assert trace.first_divergence(a, b, trace.sample_unchanged(3)).line == 2


def test_integrity_findings_stay_when_the_file_does_not_load():
    from harness.outcome import ChildOutcome
    payload = {"load": {"ok": False, "kind": "definition-error", "message": "NameError: x"},
               "checks": [_check("forbidden-ops", "fail", 1, {"ops": ["connect"]},
                                 location={"file": "f.py", "line": 3})]}
    r = engine.build_result(ChildOutcome(payload, "ok"), "f.py", "reversal")
    assert [d["id"] for d in r["diagnoses"]] == ["definition-error", "forbidden-operation"]


def test_a_table_overwritten_because_it_is_a_parameter_is_one_cause():
    """The init loop reaches the PE only because it is a Parameter: one cause, and the formula check is its
    evidence. A table overwritten while a buffer has no such mechanism and stays apart."""
    over = _check("pe-formula", "fail", 1.04, {"kind": "overwritten", "mechanism": {"kind": "overwritten"}},
                  location={"file": "f.py", "line": 155})
    param = _check("pe-buffer", "fail", ["pe"], location={"file": "f.py", "line": 45})
    d = engine.diagnose({"assignment": "reversal", "checks": [param, over], "submission": "f.py"})
    assert [x["id"] for x in d] == ["positional-encoding-trainable"]
    assert any("line 155" in e for e in d[0]["evidence"])
    assert "positional-encoding-trainable" not in [i for i, _ in _ids([over])]
    assert len(_ids([param, _check("pe-formula", "fail", 0.5, {"kind": "frequencies"})])) == 2


def test_the_decode_stop_line_is_the_eos_test_not_a_length_loop():
    """decode-stops-early is located at the stop that looks at EOS, even after a while over the length."""
    from types import SimpleNamespace

    from harness.child.probes.decode_batch import _stop_line
    text = ("def greedy_decode(model, src, max_len=12):\n"
            "    ys = start(src)\n"
            "    while ys.size(1) < max_len:\n"
            "        nxt = step(model, ys)\n"
            "        if nxt.numel() == 0:\n"
            "            break\n"
            "        if nxt[0].item() == EOS:\n"
            "            break\n"
            "    return ys\n")
    assert _stop_line(SimpleNamespace(source=SimpleNamespace(text=text))) == 7
    plain = text.replace("nxt[0].item() == EOS", "nxt[0].item() == 2")
    assert _stop_line(SimpleNamespace(source=SimpleNamespace(text=plain))) == 3      # no EOS named: the first stop
