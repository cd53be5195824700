"""The lm diagnosis library (harness/child/probes/lm/diag), in process: every lm mutant is fingerprinted as its own
cause, correct code stays clean, properties hold on every correct style, interface problems are named
as such, and the hand-written corpus bugs (tests/corpus/lm/bugs) are named on the right component
and, for most, with the right cause (targets asserted on the calibration split; the holdout is
measured and printed, not tuned on).
"""
from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
import torch

from harness.child.probes.lm.diag import cause_ids, interface, properties
from harness.child.probes.lm.diag.diagnose import diagnose_adapters, diagnose_component, first_failing
from harness.child.probes.lm.diag.fingerprint import fingerprint, variant
from harness.child.probes.lm.diag.inputs import ADAPTER, COMPONENTS, canonical, closure
from mutants.lm_registry import LM_MUTANTS

LM = Path(__file__).resolve().parents[1] / "corpus" / "lm"
MANIFEST = json.loads((LM / "manifest.json").read_text())
_spec = importlib.util.spec_from_file_location("lmcorpus_tools_diag", LM / "tools" / "lmcorpus.py")
lmcorpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lmcorpus)

NUMERIC = [m for m in LM_MUTANTS if m.cause != "interface-mismatch"]
INTERFACE = [m for m in LM_MUTANTS if m.cause == "interface-mismatch"]

# The corpus was written before these diagnoses and names its bugs in its own words. Each name maps to
# the cause id mtxdiag uses for the same mechanism (the mutant catalogue's id where a mutant has it);
# every bug of category "interface" is `interface-mismatch`.
CORPUS_NAMES = {
    "rope-wrong-frequency-exponent": "rope-frequency-exponent",
    "softmax-no-max-subtraction": "softmax-overflow",
    "softmax-in-float16": "softmax-low-precision",
    "mask-zero-not-inf": "mask-fill-zero",
    "causal-off-by-one": "causal-mask-off-by-one",
    "heads-split-without-transpose": "heads-split-wrong",
    "swiglu-silu-other-branch": "swiglu-gate-on-wrong-branch",
    "swiglu-gelu-not-silu": "swiglu-wrong-activation",
    "block-residual-skips-attention": "attention-output-dropped",
    "cosine-floor-starts-late": "schedule-floor-late",
    "warmup-integer-division": "schedule-warmup-integer-division",
    "clipping-scales-below-max": "clipping-scales-up",
    "get-batch-not-shifted": "target-not-shifted",
    "get-batch-last-start-never-sampled": "get-batch-start-range",
    "rmsnorm-no-float32": "rmsnorm-no-float32-upcast",
    "adamw-coupled-decay": "adamw-coupled-weight-decay",
}


def expected_cause(entry):
    if entry["category"] == "interface":
        return "interface-mismatch"
    return CORPUS_NAMES.get(entry["cause"], entry["cause"])


def _adapters(module):
    return {a: getattr(module, a) for a in ADAPTER.values() if hasattr(module, a)}


def _mid(m):
    return m.id


# ----------------------------------------------------------------------------- mutants


def test_fingerprint_of_the_reference_and_of_an_upstream_bug():
    assert fingerprint("lm", getattr(variant(None), "run_transformer_lm")) is None
    rope_bug = variant("lm-rope-halves-not-pairs").run_transformer_lm       # a RoPE bug seen from the LM
    found = fingerprint("lm", rope_bug)
    assert found["cause"] == "rope-halves-not-pairs" and found["mutant_component"] == "rope"
    assert "a bug in rope" in found["evidence"][0]


def test_component_names_and_closure():
    assert canonical("mha-rope") == "mha_rope" and canonical("cross-entropy") == "cross_entropy"
    with pytest.raises(KeyError):
        canonical("attention")
    assert closure("block")[-1] == "block" and {"rope", "sdpa", "softmax", "rmsnorm"} <= set(closure("block"))


# ----------------------------------------------------------------------------- correct code

def test_reference_passes_and_satisfies_every_property():
    ref = _adapters(variant(None))
    for comp in COMPONENTS:
        assert diagnose_component(comp, ref[ADAPTER[comp]])["status"] == "pass", comp
        measured = properties.check(comp, ref[ADAPTER[comp]])
        assert measured or comp in ("linear", "embedding", "silu"), comp     # every other one has properties
        failed = [p for p in measured if not p["passed"]]
        assert failed == [], (comp, failed)


def test_half_done_repository_is_not_implemented_where_it_raises():
    entry = next(e for e in MANIFEST if e["path"] == "special/repo_half_done")
    with lmcorpus.loaded(LM / entry["path"]) as adapters:
        report = diagnose_adapters(adapters)
    got = {c: r["status"] for c, r in report["components"].items()}
    assert got == {c: ("not-implemented" if v == "not-implemented" else v) for c, v in entry["expected"].items()}


def test_missing_adapter_is_not_implemented():
    assert diagnose_component("rope", None)["status"] == "not-implemented"


# ----------------------------------------------------------------------------- interface

def test_interface_messages_name_both_sides():
    missing = ('raised RuntimeError: Error(s) in loading state_dict for Block:\n\tMissing key(s) in state_dict: '
               '"attn.o_proj.weight". \n\tUnexpected key(s) in state_dict: "attn.output_proj.weight". ')
    found = interface.from_exception("block", missing)
    assert found["kind"] == "state-dict-keys"
    assert "attn.output_proj.weight" in found["evidence"][0] and "attn.o_proj.weight" in found["evidence"][0]
    bias = 'raised RuntimeError: Error(s) in loading state_dict for L:\n\tMissing key(s) in state_dict: "bias". '
    assert "bias" in interface.from_exception("linear", bias)["evidence"][0]
    size = ("raised RuntimeError: Error(s) in loading state_dict for LM:\n\tsize mismatch for layers.0.ffn.w1.weight: "
            "copying a param with shape torch.Size([48, 32]) from checkpoint, the shape in current model is "
            "torch.Size([4, 32]).")
    args = (60, 16, 32, 2, 4, 48, 10000.0)
    names = ("vocab_size", "context_length", "d_model", "num_layers", "num_heads", "d_ff", "rope_theta")
    line = interface.from_exception("lm", size, args, names)["evidence"][0]
    assert "num_heads's value where d_ff belongs" in line
    assert interface.from_exception("softmax", "raised ValueError: something else") is None


def test_interface_without_an_exception():
    def linear_with_bias(d_in, d_out, weights, in_features):
        return in_features @ weights.T + 0.1
    assert diagnose_component("linear", linear_with_bias)["cause"] == "interface-mismatch"

    def mha_qk_swapped(d_model, num_heads, q, k, v, o, x):
        return variant(None).run_multihead_self_attention(d_model, num_heads, k, q, v, o, x)
    result = diagnose_component("mha", mha_qk_swapped)
    assert result["cause"] == "interface-mismatch" and "q_proj_weight and k_proj_weight" in result["evidence"][0]

    def embedding_int(vocab_size, d_model, weights, token_ids):
        return weights[token_ids].to(token_ids.dtype)
    assert diagnose_component("embedding", embedding_int)["cause"] == "interface-mismatch"


# ----------------------------------------------------------------------------- the corpus bugs

def _corpus_scores(split):
    rows = []
    for e in (e for e in MANIFEST if e["kind"] == "bug" and e["split"] == split):
        with lmcorpus.loaded(LM / e["path"]) as adapters:
            comp, top = first_failing(adapters)
        json.dumps(top, allow_nan=False)                  # plain JSON, ready for a check's data
        assert top.get("cause") is None or top["cause"] in cause_ids(), e["path"]
        rows.append({"path": e["path"], "component": comp, "want_component": e["component"],
                     "cause": top.get("cause"), "want_cause": expected_cause(e),
                     "confidence": top.get("confidence", 0.0)})
    n = len(rows)
    component_ok = sum(r["component"] == r["want_component"] for r in rows)
    cause_ok = sum(r["component"] == r["want_component"] and r["cause"] == r["want_cause"] for r in rows)
    wrong_high = [r for r in rows if r["cause"] != r["want_cause"] and r["confidence"] >= 0.8]
    print(f"\nlm corpus bugs, {split}: {n} bugs; component {component_ok}/{n}, cause {cause_ok}/{n}, "
          f"wrong causes at >= 0.8: {len(wrong_high)}")
    for r in rows:
        if r["cause"] != r["want_cause"] or r["component"] != r["want_component"]:
            print(f"  {r['path']}: {r['component']}/{r['cause']} ({r['confidence']}), expected "
                  f"{r['want_component']}/{r['want_cause']}")
    return n, component_ok, cause_ok, wrong_high


# ----------------------------------------------------------------------------- partial credit

def test_downstream_failures_have_their_own_measured_diagnosis():
    """In one process nothing is folded by the build order: each failing component is diagnosed on its own
    numbers; those built on a broken RoPE reproduce the RoPE mutant's outputs, which names rope as theirs."""
    report = diagnose_adapters(_adapters(variant("lm-rope-halves-not-pairs")))
    comps = report["components"]
    assert report["first_failing"] == "rope" and comps["rope"]["cause"] == "rope-halves-not-pairs"
    for c in ("mha_rope", "block", "lm"):
        assert comps[c]["status"] == "fail" and comps[c]["mutant_component"] == "rope", (c, comps[c])
        assert "inherited_from" not in comps[c] and comps[c]["evidence"], c
    assert comps["mha"]["status"] == "pass"


@pytest.mark.parametrize("text, message", [
    ("[lm]\nmax_score = 5\n[lm.components]\nattention = 5\n", "unknown component"),
    ("[lm]\nmax_score = 10\n[lm.components]\nrope = 5\n", "sum to 5"),
    ("[lm]\nbonus = 1\n[lm.components]\nrope = 5\n", "unknown key"),
    ("[lm]\ninterface_credit = 2\n[lm.components]\nrope = 5\n", "in [0, 1]")])
def test_lm_rubric_errors(text, message):
    import tomllib
    from harness.grading.rubric_lm import LmTableError, parse_table
    with pytest.raises(LmTableError, match=re.escape(message)):
        parse_table(tomllib.loads(text)["lm"], "rubric.toml")


# ----------------------------------------------------------------------------- bugs in neither library

def _novel_bugs():
    """Bugs that are neither mutants nor corpus entries (written after the library, not tuned on):
    name -> (adapter, function, component, causes acceptable at confidence >= 0.8)."""
    import math
    import numpy as np
    ref = variant(None)

    def softmax_all(x, dim):
        e = torch.exp(x - x.amax(dim=dim, keepdim=True))
        return e / e.sum()

    def mha_mask_after(d, h, wq, wk, wv, wo, x):
        n, dh = x.shape[-2], d // h
        split = lambda t: t.view(*t.shape[:-1], h, dh).transpose(-3, -2)          # noqa: E731
        q, k, v = split(x @ wq.T), split(x @ wk.T), split(x @ wv.T)
        w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh), -1) * torch.tril(torch.ones(n, n))
        return (w @ v).transpose(-3, -2).reshape(*x.shape) @ wo.T

    def clip_sum_of_norms(params, m):
        gs = [p.grad for p in params if p.grad is not None]
        total = sum(g.norm() for g in gs)
        if total > m:
            for g in gs:
                g.mul_(m / (total + 1e-6))

    def batch_never_zero(data, b, m, device):
        s = np.random.randint(1, len(data) - m, size=b)
        x, y = np.stack([data[i:i + m] for i in s]), np.stack([data[i + 1:i + 1 + m] for i in s])
        return torch.as_tensor(x, dtype=torch.long), torch.as_tensor(y, dtype=torch.long)

    return {
        "softmax over all elements": ("run_softmax", softmax_all, "softmax", {"softmax-normalisation"}),
        "rmsnorm ignores its eps": ("run_rmsnorm", lambda d, eps, w, x: ref.run_rmsnorm(d, 1e-3, w, x), "rmsnorm",
                                    set()),
        "mha masks after the softmax": ("run_multihead_self_attention", mha_mask_after, "mha", {"mask-after-softmax"}),
        "clipping by the sum of norms": ("run_gradient_clipping", clip_sum_of_norms, "gradient_clipping", set()),
        "get_batch never starts at 0": ("run_get_batch", batch_never_zero, "get_batch", {"get-batch-start-range"}),
        "cross-entropy not averaged": ("run_cross_entropy", lambda lo, t: torch.logsumexp(lo, -1) - lo.gather(
            -1, t[:, None])[:, 0], "cross_entropy", set()),
        "schedule without warmup": ("run_get_lr_cosine_schedule", lambda it, hi, lo, tw, tc:
                                    ref.run_get_lr_cosine_schedule(max(it, tw), hi, lo, tw, tc), "lr_schedule", set()),
        "rope at reversed positions": ("run_rope", lambda d, th, n, x, pos: ref.run_rope(d, th, n, x, pos.max() - pos),
                                       "rope", set()),
        "silu with tanh": ("run_silu", lambda x: x * torch.tanh(x), "silu", set()),
    }


def _edited(edits, name):
    """The reference single file with text edits (as a student would write the bug), as a module."""
    from mutants.lm_export import load_module, reference_single_file
    text = reference_single_file()
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return load_module(text, name)


@pytest.mark.parametrize("edits, comp, cause, at_least", [
    # a key renamed in the module: interface, named on both sides
    ([("        self.weight = nn.Parameter(weight)                          # (d_out, d_in)\n",
       "        self.W = nn.Parameter(weight)\n"), ("return x @ self.weight.T ", "return x @ self.W.T ")],
     "linear", "interface-mismatch", 0.9),
    # the mutant's bug written differently: the outputs, not the code, are matched
    ([("torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)",
       "(x * x).mean(-1, keepdim=True).sqrt() + self.eps")],
     "rmsnorm", "rmsnorm-eps-outside-sqrt", 0.95),
    # positions shifted by one: no mutant; RoPE rotates at position 0
    ([("cos = self.cos[token_positions]", "cos = self.cos[token_positions + 1]"),
      ("sin = self.sin[token_positions]", "sin = self.sin[token_positions + 1]")],
     "rope", "rope-rotates-at-position-0", 0.6),
    # a causal mask two diagonals too far: no mutant; a causal leak
    ([("torch.tril(torch.ones(seq, seq, dtype=torch.bool, device=x.device))",
       "torch.tril(torch.ones(seq, seq, dtype=torch.bool, device=x.device), diagonal=2)")],
     "mha", "future-tokens-visible", 0.6),
    # the output projection as an einsum that repeats the weight's index: its own cause (issue 47), not a head
    # split: no mutant makes exactly this one (the mutant's is q, k and v)
    ([("return self.output_proj(out)", 'return torch.einsum("...sd,dd->...sd", out, self.output_proj.weight)')],
     "mha", "einsum-repeated-index", 0.9),
], ids=["key-renamed", "eps-written-differently", "rope-positions-plus-one", "causal-diagonal-2",
        "output-einsum-diagonal"])
def test_bugs_from_the_check_paths_tests(edits, comp, cause, at_least):
    module = _edited(edits, "mtx_lmdiag_edit_" + comp)
    report = diagnose_adapters(_adapters(module))
    top = report["components"][comp]
    assert report["first_failing"] == comp and top["cause"] == cause and top["confidence"] >= at_least, top
    if cause == "interface-mismatch":
        assert "'weight'" in top["evidence"][0] and "'W'" in top["evidence"][0]


def test_code_written_for_the_course_shapes_only_is_clean():
    """(batch, seq, d) inputs and 1-D positions are what the course's tests pass: code that handles
    exactly those is correct for them, and must not be flagged."""
    ref = variant(None)

    def linear_3d(d_in, d_out, weights, in_features):
        return torch.einsum("bsi,oi->bso", in_features, weights)

    def rmsnorm_3d(d_model, eps, weights, in_features):
        b, s, d = in_features.shape
        return ref.run_rmsnorm(d_model, eps, weights, in_features.reshape(b * s, d)).reshape(b, s, d)

    def rope_1d_positions(d_k, theta, max_seq_len, x, token_positions):
        assert token_positions.dim() == 1
        return ref.run_rope(d_k, theta, max_seq_len, x, token_positions)

    def sdpa_mask_required(Q, K, V, mask):
        assert mask is not None
        return ref.run_scaled_dot_product_attention(Q, K, V, mask)

    for comp, fn in (("linear", linear_3d), ("rmsnorm", rmsnorm_3d), ("rope", rope_1d_positions),
                     ("sdpa", sdpa_mask_required)):
        assert diagnose_component(comp, fn)["status"] == "pass", comp


def test_diagnosis_leaves_the_global_random_state_alone():
    import numpy as np
    torch.manual_seed(123)
    np.random.seed(123)
    expected = (torch.rand(3), np.random.rand(3))
    torch.manual_seed(123)
    np.random.seed(123)
    diagnose_component("get_batch", variant("lm-get-batch-one-window").run_get_batch)
    assert torch.equal(torch.rand(3), expected[0]) and (np.random.rand(3) == expected[1]).all()
