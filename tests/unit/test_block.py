"""The probes of the "block" assignment, in-process on the reference and on the mutants they catch.

Mutants and the reference are our own code, so they are loaded and probed in
this process (fast); the lesson's code goes through `check_file` (the child
process) once per causal form and must come back clean.
"""
from __future__ import annotations

import functools
from pathlib import Path

import pytest
import torch

from harness.child.loader import load, read_source
from harness.child.probes import block, block_attention, block_causal, block_lm, block_wiring, positional
from harness.child.probes.base import Context
from mutants import get, source

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "reference_model" / "block.py"


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """As in the child: one torch thread (these models are tiny; a shared machine punishes oversubscription)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@functools.lru_cache(maxsize=None)
def _module(name: str, text: str):
    src = read_source(f"{name}.py", text.encode())
    return load(src, module_name=f"block_under_test_{name.replace('-', '_').replace('.', '_')}"), src


def ctx_for(name: str, seed: int = 0) -> Context:
    """A probe Context on the reference ("reference"), a correct fixture ("fixture:<file>") or a mutant id."""
    if name == "reference":
        text = REFERENCE.read_text()
    elif name.startswith("fixture:"):
        text = (ROOT / "tests" / "fixtures" / "correct" / name.split(":", 1)[1]).read_text()
    elif name.startswith("text:"):
        text = name.split(":", 1)[1]
        name = f"text{abs(hash(text))}"
    else:
        text = source(get(name))
    module, src = _module(name, text)
    return Context(module, src, "block", seed)


def one(checks, id):
    [c] = [c for c in checks if c["id"] == id]
    return c


def line_of(ctx, needle):
    return next(n for n, line in enumerate(ctx.source.text.splitlines(), 1) if needle in line)


# ---------------------------------------------------------------------------
# block-rows-sum
# ---------------------------------------------------------------------------

def test_rows_sum_reference_and_weights_artifact():
    ctx = ctx_for("reference")
    c = one(block_attention.rows_sum(ctx), "block-rows-sum")
    assert c["status"] == "pass" and c["measured"] < block_attention.ROWS_TOL
    plain = ctx.artifacts["block_weights"]["plain"]
    assert len(plain) == 2 and len(plain[0]) == 8 and len(plain[0][0]) == 8      # [head][T][T]


def test_rows_sum_catches_softmax_over_queries():
    ctx = ctx_for("block-softmax-wrong-dim")
    c = one(block_attention.rows_sum(ctx), "block-rows-sum")
    assert c["status"] == "fail" and c["measured"] > 0.1
    assert c["location"]["line"] == line_of(ctx, "F.softmax(scores, dim=-2)")
    assert c["data"]["softmax_dims"] == [-2]


# ---------------------------------------------------------------------------
# block-saturation
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["reference", "fixture:block_separate_qkv.py", "fixture:block_prenorm_sdpa.py"])
def test_saturation_correct_code(name):
    c = one(block_attention.saturation(ctx_for(name)), "block-saturation")
    assert c["status"] == "pass" and c["measured"] < 0.13


def test_saturation_catches_missing_sqrt_dk():
    ctx = ctx_for("block-missing-sqrt-dk")
    c = one(block_attention.saturation(ctx), "block-saturation")
    assert c["status"] == "fail" and c["measured"] > 0.35
    assert c["location"]["line"] == line_of(ctx, "scores = q @ k.transpose(-2, -1)")


# ---------------------------------------------------------------------------
# block-causal
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name,form", [("reference", "init"), ("fixture:block_separate_qkv.py", "init"),
                                       ("fixture:block_prenorm_sdpa.py", "forward")])
def test_causal_correct_code_both_forms(name, form):
    ctx = ctx_for(name)
    c = one(block_causal.causal(ctx), "block-causal")
    assert c["status"] == "pass", c["detail"]
    assert c["data"]["kind"] == "ok" and c["data"]["form"] == form
    assert c["data"]["past_fraction"] == 1.0
    causal = ctx.artifacts["block_weights"]["causal"]
    assert all(w == 0.0 for head in causal for i, row in enumerate(head) for w in row[i + 1:])


FORWARD_FLAG_ONLY = REFERENCE.read_text().replace(
    "def __init__(self, d_model, n_heads, d_ff, causal=False):", "def __init__(self, d_model, n_heads, d_ff):").replace(
    "        self.causal = causal\n", "").replace(
    "        causal = self.causal if causal is None else causal\n", "")


def test_causal_forward_keyword_form():
    assert "causal=False):" not in FORWARD_FLAG_ONLY.split("class TransformerBlock")[1].split("def forward")[0]
    ctx = ctx_for("text:" + FORWARD_FLAG_ONLY)
    assert block.causal_form(ctx) == "forward"
    c = one(block_causal.causal(ctx), "block-causal")
    assert c["status"] == "pass" and c["data"]["form"] == "forward"


@pytest.mark.parametrize("mutant,kind,needle", [
    ("block-causal-mask-missing", "missing", "x = self.norm1(x + self.attn(x))"),
    ("block-causal-mask-inverted", "inverted", "future = torch.tril("),
    ("block-causal-diagonal-masked", "diagonal", "diagonal=0)"),
    ("block-causal-bias-symmetric", "symmetric-bias", ".abs()"),      # the origin: where the bias is built
])
def test_causal_catches_mask_bugs(mutant, kind, needle):
    ctx = ctx_for(mutant)
    c = one(block_causal.causal(ctx), "block-causal")
    assert c["status"] == "fail" and c["data"]["kind"] == kind, c["detail"]
    assert c["location"]["line"] == line_of(ctx, needle)


# ---------------------------------------------------------------------------
# block-permutation
# ---------------------------------------------------------------------------

def test_permutation_reference():
    c = one(block_wiring.permutation(ctx_for("reference")), "block-permutation")
    assert c["status"] == "pass" and c["measured"] < block_wiring.PERM_TOL


@pytest.mark.parametrize("mutant,needle", [("block-heads-split-wrong", "out = out.reshape(seq_len, d_model)"),
                                           ("block-heads-split-wrong-b", "q = q.reshape(")])
def test_permutation_catches_heads_split(mutant, needle):
    ctx = ctx_for(mutant)
    c = one(block_wiring.permutation(ctx), "block-permutation")
    assert c["status"] == "fail" and c["measured"] > 0.1
    assert c["location"]["line"] == line_of(ctx, needle)


# ---------------------------------------------------------------------------
# block-residual
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name,kind", [("reference", "post-norm"), ("fixture:block_prenorm_sdpa.py", "pre-norm")])
def test_residual_correct_code(name, kind):
    c = one(block_wiring.residual(ctx_for(name)), "block-residual")
    assert c["status"] == "pass" and c["data"]["kind"] == kind and c["measured"] > 1.0


def test_residual_catches_missing_residual():
    ctx = ctx_for("block-missing-residual")
    c = one(block_wiring.residual(ctx), "block-residual")
    assert c["status"] == "fail" and c["data"]["kind"] == "constant" and c["measured"] < 1e-6
    assert c["location"]["line"] == line_of(ctx, "x = self.norm1(self.attn(x, causal=causal))")


# ---------------------------------------------------------------------------
# positional encoding: pe-formula (registered for block too) and pe-relative
# ---------------------------------------------------------------------------

PER_COLUMN_FREQUENCY = REFERENCE.read_text().replace(
    "    pe[:, 0::2] = torch.sin(position * div_term)\n    pe[:, 1::2] = torch.cos(position * div_term)\n",
    "    freq = torch.exp(torch.arange(d_model).float() * (-math.log(10000.0) / d_model))   # one per column\n"
    "    pe[:, 0::2] = torch.sin(position * freq[0::2])\n    pe[:, 1::2] = torch.cos(position * freq[1::2])\n")


def test_pe_reference():
    ctx = ctx_for("reference")
    assert one(positional.table(ctx), "pe-formula")["status"] == "pass"
    c = one(positional.pe_relative(ctx), "pe-relative")
    assert c["status"] == "pass" and c["measured"] < 1e-4


def test_pe_formula_mutant_fails_the_formula_but_keeps_the_rotation():
    ctx = ctx_for("block-positional-encoding-formula")
    c = one(positional.table(ctx), "pe-formula")
    assert c["status"] == "fail" and c["data"]["kind"] == "frequencies"
    # its pairs still share one frequency each, so PE(pos + k) is still a rotation of PE(pos)
    assert one(positional.pe_relative(ctx), "pe-relative")["status"] == "pass"


def test_pe_relative_catches_per_column_frequencies():
    assert PER_COLUMN_FREQUENCY != REFERENCE.read_text()
    c = one(positional.pe_relative(ctx_for("text:" + PER_COLUMN_FREQUENCY)), "pe-relative")
    assert c["status"] == "fail" and c["measured"] > 0.01


# ---------------------------------------------------------------------------
# block-lm: a tiny causal language model from the student's block learns to reverse digits
# ---------------------------------------------------------------------------

def test_lm_reference_learns():
    c = one(block_lm.lm(ctx_for("reference")), "block-lm")
    assert c["status"] == "pass", c["detail"]
    d = c["data"]
    assert d["accuracy"] >= 0.95 and d["loss_end"] < 0.1 * d["loss_start"] and d["batched"]


def test_lm_fails_with_a_broken_causal_mask():
    c = one(block_lm.lm(ctx_for("block-causal-diagonal-masked")), "block-lm")   # NaN from the first step: stops at once
    assert c["status"] == "fail" and c["measured"] < 0.3


# ---------------------------------------------------------------------------
# the lesson's code through the child process: clean in both causal forms
# ---------------------------------------------------------------------------

