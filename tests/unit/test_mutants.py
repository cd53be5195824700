"""The mutant library: every mutant applies cleanly, imports, keeps the lesson's
contract, and really has its bug - shown by a number measured the same way on
the mutant and on the reference.
"""
from __future__ import annotations

import contextlib
import copy
import csv
import importlib.util
import inspect
import io
import json
import math
import re
from dataclasses import FrozenInstanceError, dataclass
from typing import Any, Callable

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from click.testing import CliRunner
from torch.optim.optimizer import register_optimizer_step_pre_hook
from torch.overrides import TorchFunctionMode

import mutant_measures as later
import mutants
from harness.cli import mutants as cli_mutants
from harness.cli.mutants import mutants_group
from mutants import MUTANTS, Edit, EditError, Mutant, by_cause, diff, get, reference_source, source

REQUIRED_CAUSES = {
    "reversal": (
        "target-not-shifted", "causal-mask-inverted", "causal-mask-missing", "missing-sqrt-dk",
        "no-gradient-flow", "learning-rate-too-low", "inf-mask-nan", "view-not-contiguous",
        "cross-attention-swapped", "source-ignored", "positional-max-len", "stale-mask",
        "no-warmup", "softmax-wrong-dim", "data-not-reversed", "positional-encoding-formula",
        "positional-encoding-trainable", "missing-embedding-scale", "bad-output-init",
        "missing-residual", "encoder-in-decode-loop", "padding-mask-inverted",
        "pad-not-ignored", "heads-split-wrong", "data-digits-missing", "decode-stops-early",
        "dropout-at-inference", "optimizer-missing-parameters", "warmup-flat-then-jump",
        "dropout-on-residual-stream", "dropout-on-masked-scores",
    ),
    "block": (
        "softmax-wrong-dim", "missing-sqrt-dk", "causal-mask-missing", "causal-mask-inverted",
        "causal-diagonal-masked", "heads-split-wrong", "missing-residual",
        "positional-encoding-formula", "dropout-at-inference", "causal-bias-symmetric",
    ),
}
REFERENCES = {"reversal": "reference_model/reversal.py", "block": "reference_model/block.py"}
CONTRACT = {
    "reversal": ("MiniTransformer", "make_batch", "train", "greedy_decode", "PositionalEncoding",
                 "MultiHeadAttention", "padding_mask", "target_mask"),
    "block": ("TransformerBlock", "MultiHeadAttention", "positional_encoding"),
}
KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
PAD, SOS, EOS, VOCAB = 10, 11, 12, 13


def _mid(m: Mutant) -> str:
    return m.id


# ----------------------------------------------------------------------------
# loading a mutant (or a reference) as a real module from a file
# ----------------------------------------------------------------------------

@pytest.fixture(scope="session")
def load(tmp_path_factory):
    """load(mutant) or load("reversal"/"block") -> the module, cached per session."""
    directory = tmp_path_factory.mktemp("mutant_modules")
    cache: dict[str, Any] = {}

    def _load(what):
        key = what if isinstance(what, str) else what.id
        if key not in cache:
            text = reference_source(REFERENCES[what]) if isinstance(what, str) else source(what)
            name = "mtx_" + key.replace("-", "_")
            path = directory / f"{name}.py"
            path.write_text(text, encoding="utf-8")
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)     # __name__ is name, not "__main__"
            cache[key] = module
        return cache[key]

    return _load


# ----------------------------------------------------------------------------
# structure
# ----------------------------------------------------------------------------

def test_every_required_cause_has_a_mutant():
    for assignment, causes in REQUIRED_CAUSES.items():
        for cause in causes:
            assert by_cause(cause, assignment), f"no {assignment} mutant for cause {cause!r}"


def test_ids_unique_kebab_and_fields_sane():
    ids = [m.id for m in MUTANTS]
    assert len(ids) == len(set(ids))
    for m in MUTANTS:
        assert KEBAB.match(m.id), m.id
        assert KEBAB.match(m.cause), m.cause
        assert m.id.startswith(m.assignment + "-")
        assert m.assignment in mutants.ASSIGNMENTS
        assert m.reference == REFERENCES[m.assignment]
        assert m.cause in REQUIRED_CAUSES[m.assignment], f"{m.id}: cause {m.cause!r} not in the list"
        assert m.edits and all(isinstance(e, Edit) for e in m.edits)
        assert m.summary and "\n" not in m.summary
        assert len(m.explanation) > 100 and m.lesson
    with pytest.raises(FrozenInstanceError):
        MUTANTS[0].id = "x"


@pytest.mark.parametrize("mutant", MUTANTS, ids=_mid)
def test_edits_apply_exactly_once(mutant):
    reference = reference_source(mutant.reference)
    for edit in mutant.edits:
        assert reference.count(edit.old) == 1, f"{mutant.id}: {edit.old!r}"
        assert edit.old != edit.new
    text = source(mutant)
    assert text != reference
    assert text == mutant.source()
    patch = diff(mutant)
    assert patch.startswith(f"--- a/{mutant.filename}\n+++ b/{mutant.filename}\n")
    assert "\n@@ " in "\n" + patch


def test_source_rejects_bad_edits():
    good = MUTANTS[0]
    missing = Mutant(**{**good.__dict__, "id": "x", "edits": (Edit("no such text anywhere", "y"),)})
    with pytest.raises(EditError, match="does not occur"):
        source(missing)
    twice = Mutant(**{**good.__dict__, "id": "x", "edits": (Edit("import", "imp0rt"),)})
    with pytest.raises(EditError, match="occurs [0-9]+ times"):
        source(twice)


def test_get_and_by_cause():
    assert get("reversal-stale-mask").cause == "stale-mask"
    with pytest.raises(KeyError, match="reversal-stale-mask"):
        get("reversal-stale-masks")
    assert {m.assignment for m in by_cause("softmax-wrong-dim")} == {"reversal", "block"}
    assert all(m.assignment == "block" for m in by_cause("softmax-wrong-dim", "block"))


@pytest.mark.parametrize("mutant", MUTANTS, ids=_mid)
def test_mutant_imports_and_keeps_contract(mutant, load):
    compile(source(mutant), mutant.filename, "exec")
    module, reference = load(mutant), load(mutant.assignment)
    assert module.__name__ != "__main__"
    for name in CONTRACT[mutant.assignment]:
        assert hasattr(module, name), f"{mutant.id} lost {name}"
        ours, theirs = getattr(module, name), getattr(reference, name)
        ours = ours.__init__ if inspect.isclass(ours) else inspect.unwrap(ours)
        theirs = theirs.__init__ if inspect.isclass(theirs) else inspect.unwrap(theirs)
        assert list(inspect.signature(ours).parameters) == list(inspect.signature(theirs).parameters)


# ----------------------------------------------------------------------------
# measurement helpers
# ----------------------------------------------------------------------------

def build_batch(lengths, seed=0):
    """(src, tgt) like the lesson's make_batch, independent of the module under test."""
    g = torch.Generator().manual_seed(seed)
    T = max(lengths)
    src = torch.full((len(lengths), T), PAD, dtype=torch.long)
    tgt = torch.full((len(lengths), T + 2), PAD, dtype=torch.long)
    for i, L in enumerate(lengths):
        seq = torch.randint(0, 10, (L,), generator=g)
        src[i, :L] = seq
        tgt[i, 0] = SOS
        tgt[i, 1:L + 1] = seq.flip(0)
        tgt[i, L + 1] = EOS
    return src, tgt


def tiny(mod, **overrides):
    torch.manual_seed(0)
    kwargs = dict(d_model=16, h=2, d_ff=32, num_layers=1, dropout=0.0)
    kwargs.update(overrides)
    return mod.MiniTransformer(**kwargs)


def pe_formula(n, d):
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d, 2, dtype=torch.float64)
    angle = pos / 10000.0 ** (two_i / d)
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return pe


def change_real_tokens(src):
    return torch.where(src == PAD, src, (src + 3) % 10)


class Capture(TorchFunctionMode):
    """Records (args, kwargs, result) of every call of the given torch functions."""

    def __init__(self, *funcs):
        super().__init__()
        self.funcs, self.calls = funcs, []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if func in self.funcs:
            self.calls.append((args, kwargs, result))
        return result


@contextlib.contextmanager
def attention_maps(model, mha_class):
    """Collects the attention weights returned by every mha_class module."""
    maps, handles = [], []
    for m in model.modules():
        if isinstance(m, mha_class):
            handles.append(m.register_forward_hook(lambda _m, _i, out: maps.append(out[1].detach())))
    try:
        yield maps
    finally:
        for h in handles:
            h.remove()


def forward_error(model, src, tgt_in):
    try:
        with torch.no_grad():
            model(src, tgt_in)
    except Exception as exc:    # the message is the measurement
        return f"{type(exc).__name__}: {exc}"
    return None


def run_train(mod, model, **kwargs):
    with contextlib.redirect_stdout(io.StringIO()):
        mod.train(model, log_every=10 ** 9, **kwargs)


# ----------------------------------------------------------------------------
# reversal measurements (each returns numbers; same call on mutant and reference)
# ----------------------------------------------------------------------------

@torch.no_grad()
def leakage(mod):
    """Max change of earlier outputs when only the LAST decoder input token changes."""
    model = tiny(mod).eval()
    src, tgt = build_batch([8], seed=1)
    tgt_in = tgt[:, :-1]
    changed = tgt_in.clone()
    changed[0, -1] = (changed[0, -1] + 1) % 10
    a, _ = model(src, tgt_in)
    b, _ = model(src, changed)
    return (a[0, :-1] - b[0, :-1]).abs().max().item()


@torch.no_grad()
def saturation(mod):
    """Mean over rows of the largest attention weight, first encoder layer, at init."""
    torch.manual_seed(0)
    model = mod.MiniTransformer(dropout=0.0).eval()
    src, tgt = build_batch([10] * 8, seed=2)
    with attention_maps(model.enc[0], mod.MultiHeadAttention) as maps:
        model(src, tgt[:, :-1])
    return maps[0].max(dim=-1).values.mean().item()


def encoder_grad(mod):
    """Gradient norm reaching the source embedding after one backward pass."""
    model = tiny(mod)
    src, tgt = build_batch([4, 6, 8, 10], seed=3)
    logits, _ = model(src, tgt[:, :-1])
    F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1), ignore_index=PAD).backward()
    grad = model.src_emb.weight.grad
    return 0.0 if grad is None else grad.norm().item()


def lr_schedule(mod):
    """lr used at the first optimiser step of the module's own train(), and the peak lr."""
    seen = []

    def hook(optimizer, args, kwargs):
        group = optimizer.param_groups[0]
        seen.append((group["lr"], group.get("initial_lr", group["lr"])))

    handle = register_optimizer_step_pre_hook(hook)
    try:
        model = tiny(mod)
        torch.manual_seed(0)
        run_train(mod, model, steps=1, batch_size=4)
    finally:
        handle.remove()
    first, peak = seen[0]
    return {"first": first, "peak": peak}


@torch.no_grad()
def nan_on_padded_row(mod):
    """Fraction of NaN logits when one source row is entirely padding."""
    model = tiny(mod).eval()
    src, tgt = build_batch([6, 6], seed=4)
    src[1] = PAD
    logits, _ = model(src, tgt[:, :-1])
    return torch.isnan(logits).float().mean().item()


def error_at_first_forward(mod):
    src, tgt = build_batch([5, 7, 9], seed=5)
    return forward_error(tiny(mod).eval(), src, tgt[:, :-1])


def error_by_length(mod):
    model = tiny(mod).eval()
    out = {}
    for length in (10, 30):
        src, tgt = build_batch([length, length - 2], seed=6)
        out[length] = forward_error(model, src, tgt[:, :-1])
    return out


@torch.no_grad()
def source_sensitivity(mod):
    """Max change of the logits when every real source token changes."""
    model = tiny(mod).eval()
    src, tgt = build_batch([7, 7], seed=7)
    a, _ = model(src, tgt[:, :-1])
    b, _ = model(change_real_tokens(src), tgt[:, :-1])
    return (a - b).abs().max().item()


@torch.no_grad()
def sensitivity_with_attention_silenced(mod):
    """Source sensitivity after zeroing W_o of every encoder self-attention (the
    attention sublayer outputs 0): with a residual the input still gets through."""
    model = tiny(mod).eval()
    for layer in model.enc:
        nn.init.zeros_(layer.attn.W_o.weight)
        nn.init.zeros_(layer.attn.W_o.bias)
    src, tgt = build_batch([7, 7], seed=8)
    a, _ = model(src, tgt[:, :-1])
    b, _ = model(change_real_tokens(src), tgt[:, :-1])
    return (a - b).abs().max().item()


@torch.no_grad()
def padded_row_sensitivity(mod):
    """Change of a padded row's logits when its real source tokens change."""
    model = tiny(mod).eval()
    src, tgt = build_batch([5, 8], seed=9)
    a, _ = model(src, tgt[:, :-1])
    b, _ = model(change_real_tokens(src), tgt[:, :-1])
    return (a[0] - b[0]).abs().max().item()


@torch.no_grad()
def stale_mask(mod):
    """Second batch (same shape, other padding) vs a fresh copy of the same weights."""
    model = tiny(mod).eval()
    fresh = copy.deepcopy(model)
    src1, tgt1 = build_batch([4, 5, 6, 8], seed=10)
    src2, tgt2 = build_batch([8, 6, 5, 4], seed=11)
    model(src1, tgt1[:, :-1])
    try:
        a, _ = model(src2, tgt2[:, :-1])
    except RuntimeError:
        return math.inf
    b, _ = fresh(src2, tgt2[:, :-1])
    return (a - b).abs().max().item()


def encoder_calls(mod):
    """How many times greedy_decode runs the encoder for one batch (max_len=6)."""
    model = tiny(mod)
    calls = []
    original = model.encode

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    model.encode = counting
    src, _ = build_batch([5, 5], seed=12)
    mod.greedy_decode(model, src, max_len=6)
    return len(calls)


def pe_table_error(mod):
    """Max abs difference between PositionalEncoding's table and the formula."""
    pe = mod.PositionalEncoding(16, 50, dropout=0.0).pe.detach()[0].double()
    return (pe - pe_formula(50, 16)).abs().max().item()


def pe_parameters(mod):
    """Number of trainable values in PositionalEncoding (and in the model's pos)."""
    alone = sum(p.numel() for p in mod.PositionalEncoding(16, 50, dropout=0.0).parameters())
    inside = sum(p.numel() for p in tiny(mod).pos.parameters())
    return alone + inside


@torch.no_grad()
def token_position_ratio(mod):
    """std of what encode adds to the positional table, over the table's std."""
    torch.manual_seed(0)
    model = mod.MiniTransformer(dropout=0.0).eval()
    seen = []
    handle = model.pos.register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
    try:
        src, tgt = build_batch([10] * 4, seed=13)
        model(src, tgt[:, :-1])
    finally:
        handle.remove()
    tokens = seen[0]
    return (tokens.std() / model.pos.pe[0, :tokens.size(1)].std()).item()


@torch.no_grad()
def first_loss(mod):
    """Cross-entropy of the default model at initialisation on 64 fresh sequences."""
    torch.manual_seed(0)
    model = mod.MiniTransformer()
    lengths = torch.randint(4, 11, (64,), generator=torch.Generator().manual_seed(14)).tolist()
    src, tgt = build_batch(lengths, seed=14)
    logits, _ = model(src, tgt[:, :-1])
    return F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1), ignore_index=PAD).item()


def loss_call(mod):
    """The first cross_entropy call inside the module's own train(): how often its
    labels equal the decoder input at the same position, and how far its value is
    from the loss with padding ignored."""
    model = tiny(mod)
    inputs = []
    handle = model.register_forward_pre_hook(lambda _m, args: inputs.append(args[1]))
    capture = Capture(F.cross_entropy)
    try:
        torch.manual_seed(0)
        with capture:
            run_train(mod, model, steps=1, batch_size=8)
    finally:
        handle.remove()
    (logits, labels, *_), kwargs, value = capture.calls[0]
    labels = labels.reshape(-1)
    decoder_in = inputs[0].reshape(-1)
    real = labels != PAD
    equal = (labels[real] == decoder_in[real]).float().mean().item()
    ignored = F.cross_entropy(logits.detach(), labels, ignore_index=PAD).item()
    return {"labels_equal_input": equal, "pad_gap": abs(value.item() - ignored),
            "padding": int((~real).sum())}


def data_reversed(mod):
    """Fraction of make_batch rows whose target is the reversed source."""
    torch.manual_seed(0)
    src, tgt = mod.make_batch(16)
    good = 0
    for i in range(src.size(0)):
        L = int((src[i] != PAD).sum())
        good += bool(torch.equal(tgt[i, 1:L + 1], src[i, :L].flip(0)))
    return good / src.size(0)


def missing_digits(mod):
    """Digits 0-9 that never appear in 10 batches of 32 sources from make_batch."""
    torch.manual_seed(0)
    seen = torch.cat([mod.make_batch(32)[0].flatten() for _ in range(10)])
    return sorted(set(range(10)) - set(seen.tolist()))


@torch.no_grad()
def rows_cut_in_batch(mod):
    """Rows of a batched greedy_decode shorter (up to EOS) than the same source decoded alone, with the row
    that ends first placed first."""
    model = tiny(mod).eval()
    model.generator.bias[EOS] += 1.0          # at init no row would end within 12 steps; now they end unevenly
    src, _ = build_batch([5] * 8, seed=21)

    def until_eos(row):
        row = row[1:]
        return row[:row.index(EOS) + 1] if EOS in row else row
    alone = [until_eos(mod.greedy_decode(model, src[i:i + 1], max_len=12)[0][0].tolist()) for i in range(8)]
    order = sorted(range(8), key=lambda i: (EOS not in alone[i], len(alone[i])))
    together = mod.greedy_decode(model, src[order], max_len=12)[0]
    return sum(len(until_eos(together[k].tolist())) < len(alone[i]) for k, i in enumerate(order))


@torch.no_grad()
def row_sum_error(mod):
    """Max |sum over keys - 1| of every attention map of the model."""
    model = tiny(mod).eval()
    src, tgt = build_batch([6, 8], seed=15)
    with attention_maps(model, mod.MultiHeadAttention) as maps:
        model(src, tgt[:, :-1])
    return max((m.sum(dim=-1) - 1).abs().max().item() for m in maps)


@torch.no_grad()
def mha_equivariance(mod):
    """Max |MHA(x[perm]) - MHA(x)[perm]| for the batched attention (no mask)."""
    torch.manual_seed(0)
    mha = mod.MultiHeadAttention(16, 2, dropout=0.0).eval()
    x = torch.randn(2, 6, 16)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    a, _ = mha(x[:, perm], x[:, perm], x[:, perm])
    b, _ = mha(x, x, x)
    return (a - b[:, perm]).abs().max().item()


@torch.no_grad()
def eval_twice(mod):
    """Max |logits - logits again| of two eval-mode passes of the same batch (default dropout)."""
    torch.manual_seed(0)
    model = tiny(mod).eval()
    src, tgt = build_batch([7, 5], seed=7)
    a, _ = model(src, tgt[:, :-1])
    b, _ = model(src, tgt[:, :-1])
    return (a - b).abs().max().item()


# ----------------------------------------------------------------------------
# block measurements
# ----------------------------------------------------------------------------

@torch.no_grad()
def block_causal(mod):
    """A causal block's softmax weights: the largest weight above the diagonal, NaNs in
    the weights' first row, non-finite outputs."""
    torch.manual_seed(0)
    block = mod.TransformerBlock(16, 2, 32, causal=True)
    x = torch.randn(6, 16)
    capture = Capture(F.softmax)
    with capture:
        out = block(x)
    weights = capture.calls[0][2]                       # (heads, seq, seq)
    upper = torch.nan_to_num(weights, nan=1.0).triu(1).abs().max().item()
    return {"upper": upper, "first_row_nan": int(torch.isnan(weights[:, 0]).sum()),
            "nonfinite_out": int((~torch.isfinite(out)).sum())}


@torch.no_grad()
def block_row_sum_error(mod):
    torch.manual_seed(0)
    block = mod.TransformerBlock(16, 2, 32)
    capture = Capture(F.softmax)
    with capture:
        block(torch.randn(6, 16))
    return (capture.calls[0][2].sum(dim=-1) - 1).abs().max().item()


@torch.no_grad()
def block_saturation(mod):
    """Mean largest weight per row at init, one head of size 64, unit-variance input."""
    torch.manual_seed(0)
    mha = mod.MultiHeadAttention(64, 1)
    capture = Capture(F.softmax)
    with capture:
        mha(torch.randn(16, 64))
    return capture.calls[0][2].max(dim=-1).values.mean().item()


@torch.no_grad()
def block_equivariance(mod):
    torch.manual_seed(0)
    mha = mod.MultiHeadAttention(16, 2)
    x = torch.randn(6, 16)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    return (mha(x[perm]) - mha(x)[perm]).abs().max().item()


@torch.no_grad()
def block_eval_twice(mod):
    """Max |f(x) - f(x) again| of the block in eval mode."""
    torch.manual_seed(0)
    block = mod.TransformerBlock(16, 2, 32).eval()
    x = torch.randn(6, 16)
    return (block(x) - block(x)).abs().max().item()


@torch.no_grad()
def block_residual(mod):
    """With every nn.Linear weight and bias zeroed, does the output still vary with x?"""
    torch.manual_seed(0)
    block = mod.TransformerBlock(16, 2, 32)
    for m in block.modules():
        if isinstance(m, nn.Linear):
            nn.init.zeros_(m.weight)
            nn.init.zeros_(m.bias)
    return (block(torch.randn(6, 16)) - block(torch.randn(6, 16))).abs().max().item()


def block_pe_error(mod):
    return (mod.positional_encoding(50, 16).double() - pe_formula(50, 16)).abs().max().item()


# ----------------------------------------------------------------------------
# (assignment, cause) -> measurement and the comparison reference vs mutant
# ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Probe:
    measure: Callable[[Any], Any]
    check: Callable[[Any, Any], bool]      # check(reference_value, mutant_value)
    what: str


PROBES = {
    ("reversal", "target-not-shifted"): Probe(
        loss_call,
        lambda r, m: r["labels_equal_input"] < 0.5 and m["labels_equal_input"] == 1.0,
        "fraction of labels equal to the decoder input at the same position"),
    ("reversal", "causal-mask-inverted"): Probe(
        leakage, lambda r, m: r < 1e-6 and m > 1e-3, "leakage from the last input token"),
    ("reversal", "causal-mask-missing"): Probe(
        leakage, lambda r, m: r < 1e-6 and m > 1e-3, "leakage from the last input token"),
    ("reversal", "missing-sqrt-dk"): Probe(
        saturation, lambda r, m: m > r + 0.2, "mean max attention weight at init"),
    ("reversal", "no-gradient-flow"): Probe(
        encoder_grad, lambda r, m: r > 1e-4 and m == 0.0, "grad norm of src_emb"),
    ("reversal", "learning-rate-too-low"): Probe(
        lr_schedule, lambda r, m: r["peak"] == pytest.approx(1e-3) and m["peak"] <= r["peak"] / 100,
        "peak learning rate of train()"),
    ("reversal", "inf-mask-nan"): Probe(
        nan_on_padded_row, lambda r, m: r == 0.0 and m > 0.0, "NaN fraction, fully padded source row"),
    ("reversal", "view-not-contiguous"): Probe(
        error_at_first_forward,
        lambda r, m: r is None and m is not None and ("view size is not compatible" in m or "contiguous" in m),
        "error at the first forward pass"),
    ("reversal", "cross-attention-swapped"): Probe(
        error_at_first_forward, lambda r, m: r is None and m is not None and "size" in m,
        "error at the first forward pass"),
    ("reversal", "source-ignored"): Probe(
        source_sensitivity, lambda r, m: r > 1e-3 and m < 1e-7, "logit change when the source changes"),
    ("reversal", "positional-max-len"): Probe(
        error_by_length, lambda r, m: r == {10: None, 30: None} and m[10] is None and m[30] is not None,
        "error at source length 10 and 30"),
    ("reversal", "stale-mask"): Probe(
        stale_mask, lambda r, m: r < 1e-6 and m > 1e-3, "second batch vs a fresh copy"),
    ("reversal", "no-warmup"): Probe(
        lr_schedule,
        lambda r, m: r["first"] == pytest.approx(2.5e-6) and r["first"] < r["peak"] / 100
        and m["first"] == pytest.approx(m["peak"]),
        "first-step lr vs peak lr"),
    ("reversal", "softmax-wrong-dim"): Probe(
        row_sum_error, lambda r, m: r < 1e-5 and m > 0.1, "max |attention row sum - 1|"),
    ("reversal", "data-not-reversed"): Probe(
        data_reversed, lambda r, m: r == 1.0 and m < 0.2, "fraction of reversed targets"),
    ("reversal", "positional-encoding-formula"): Probe(
        pe_table_error, lambda r, m: r < 1e-5 and m > 0.1, "max |PE table - formula|"),
    ("reversal", "positional-encoding-trainable"): Probe(
        pe_parameters, lambda r, m: r == 0 and m > 0, "trainable values in PositionalEncoding"),
    ("reversal", "missing-embedding-scale"): Probe(
        token_position_ratio, lambda r, m: m < r / 4, "token std / positional std"),
    ("reversal", "bad-output-init"): Probe(
        first_loss, lambda r, m: 2.5 <= r <= 3.6 and m > 6.0, "first loss at init"),
    ("reversal", "missing-residual"): Probe(
        sensitivity_with_attention_silenced, lambda r, m: r > 1e-3 and m < 1e-7,
        "source sensitivity with the encoder attention output zeroed"),
    ("reversal", "encoder-in-decode-loop"): Probe(
        encoder_calls, lambda r, m: r == 1 and m > 1, "encoder calls per greedy_decode"),
    ("reversal", "padding-mask-inverted"): Probe(
        padded_row_sensitivity, lambda r, m: r > 1e-3 and m < 1e-7,
        "padded row's logit change when its real tokens change"),
    ("reversal", "pad-not-ignored"): Probe(
        loss_call, lambda r, m: r["padding"] > 0 and r["pad_gap"] < 1e-6 and m["pad_gap"] > 1e-3,
        "|train loss - loss with PAD ignored|"),
    ("reversal", "data-digits-missing"): Probe(
        missing_digits, lambda r, m: r == [] and m == [9], "digits never drawn by make_batch"),
    ("reversal", "decode-stops-early"): Probe(
        rows_cut_in_batch, lambda r, m: r == 0 and m > 0, "batch rows cut short against decoding alone"),
    ("reversal", "heads-split-wrong"): Probe(
        mha_equivariance, lambda r, m: r < 1e-5 and m > 1e-2, "permutation equivariance error of MHA"),
    ("reversal", "dropout-at-inference"): Probe(
        eval_twice, lambda r, m: r == 0.0 and m > 1e-4, "two eval-mode passes of the same batch"),
    ("reversal", "optimizer-missing-parameters"): Probe(
        later.params_outside_optimizer, lambda r, m: r == [] and len(m) > 0,
        "trainable parameters in no optimizer param group"),
    ("reversal", "warmup-flat-then-jump"): Probe(
        later.lr_per_step, lambda r, m: max(later.rises(r)) < 0.01 and m[:399] == [0.0] * 399 and m[399] == 1e-3,
        "lr at each of the first 420 optimizer steps of train()"),
    ("reversal", "dropout-on-residual-stream"): Probe(
        later.silenced_layer_train_change, lambda r, m: r == 0.0 and m > 0.1,
        "EncoderLayer with its Linear weights zeroed: max |train-mode output - eval-mode output|"),
    ("reversal", "dropout-on-masked-scores"): Probe(
        later.train_mode_leak, lambda r, m: r == 0.0 and m > 1e-3,
        "train mode, same dropout masks: max change of earlier logits when a later decoder token changes"),
    ("block", "dropout-at-inference"): Probe(
        block_eval_twice, lambda r, m: r == 0.0 and m > 1e-4, "two eval-mode passes of the same tokens"),
    ("block", "softmax-wrong-dim"): Probe(
        block_row_sum_error, lambda r, m: r < 1e-5 and m > 0.1, "max |weights row sum - 1|"),
    ("block", "missing-sqrt-dk"): Probe(
        block_saturation, lambda r, m: m > r + 0.2, "mean max attention weight at init"),
    ("block", "causal-mask-missing"): Probe(
        block_causal, lambda r, m: r["upper"] == 0.0 and m["upper"] > 1e-3,
        "largest causal weight above the diagonal"),
    ("block", "causal-bias-symmetric"): Probe(
        block_causal, lambda r, m: r["upper"] == 0.0 and m["upper"] > 1e-3,
        "largest causal weight above the diagonal"),
    ("block", "causal-mask-inverted"): Probe(
        block_causal, lambda r, m: r["upper"] == 0.0 and m["upper"] > 1e-3,
        "largest causal weight above the diagonal"),
    ("block", "causal-diagonal-masked"): Probe(
        block_causal,
        lambda r, m: r["first_row_nan"] == 0 and r["nonfinite_out"] == 0
        and m["first_row_nan"] > 0 and m["nonfinite_out"] > 0,
        "NaNs in the first weight row and the output"),
    ("block", "heads-split-wrong"): Probe(
        block_equivariance, lambda r, m: r < 1e-5 and m > 1e-2, "permutation equivariance error of MHA"),
    ("block", "missing-residual"): Probe(
        block_residual, lambda r, m: r > 0.1 and m < 1e-6, "output variation with all Linear zeroed"),
    ("block", "positional-encoding-formula"): Probe(
        block_pe_error, lambda r, m: r < 1e-5 and m > 0.1, "max |PE table - formula|"),
}


def test_every_mutant_has_a_probe():
    assert {(m.assignment, m.cause) for m in MUTANTS} <= set(PROBES)


@pytest.fixture(scope="session")
def reference_value(load):
    cache: dict = {}

    def _value(assignment, measure):
        key = (assignment, measure.__name__)
        if key not in cache:
            cache[key] = measure(load(assignment))
        return cache[key]

    return _value


@pytest.mark.parametrize("mutant", MUTANTS, ids=_mid)
def test_mutant_shows_its_bug(mutant, load, reference_value):
    probe = PROBES[(mutant.assignment, mutant.cause)]
    ref = reference_value(mutant.assignment, probe.measure)
    value = probe.measure(load(mutant))
    print(f"{mutant.id}: {probe.what}: reference {ref!r}, mutant {value!r}")
    assert probe.check(ref, value), f"{mutant.id}: {probe.what}: reference {ref!r}, mutant {value!r}"


def test_reference_first_loss_and_schedule_match_the_lesson(load, reference_value):
    ref = reference_value("reversal", first_loss)
    assert 2.5 <= ref <= 3.6
    schedule = reference_value("reversal", lr_schedule)
    assert schedule == {"first": pytest.approx(2.5e-6), "peak": pytest.approx(1e-3)}


# ----------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------

def test_cli_list():
    result = CliRunner().invoke(mutants_group, ["list"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    every = mutants.ALL_MUTANTS            # without --assignment: every assignment's, lm's included
    assert len(lines) == len(every) > len(MUTANTS)
    assert {m.assignment for m in every} == set(mutants.ALL_ASSIGNMENTS)
    for line, m in zip(lines, every):
        assert line.split()[:2] == [m.id, m.cause] and line.endswith(m.summary)
    columns = {(line.index(m.cause, len(m.id)), line.index(m.summary, len(m.id) + len(m.cause)))
               for line, m in zip(lines, every)}
    assert len(columns) == 1                                       # aligned columns
    block = CliRunner().invoke(mutants_group, ["list", "--assignment", "block"])
    assert block.exit_code == 0
    assert [line.split()[0] for line in block.output.splitlines()] == \
        [m.id for m in MUTANTS if m.assignment == "block"]


def test_cli_show_plain_when_piped():
    m = get("reversal-causal-mask-inverted")
    result = CliRunner().invoke(mutants_group, ["show", m.id])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output
    assert "--- a/reversal.py" in result.output and "+++ b/reversal.py" in result.output
    assert "-    causal = torch.tril(" in result.output
    assert "+    causal = torch.triu(" in result.output
    flat = " ".join(result.output.split())
    assert m.explanation in flat and " ".join(m.lesson.split()) in flat


def test_cli_show_colour():
    coloured = CliRunner().invoke(mutants_group, ["show", "block-missing-residual", "--color", "always"])
    assert coloured.exit_code == 0 and "\x1b[32m+" in coloured.output and "\x1b[31m-" in coloured.output


def test_colour_auto_needs_tty_and_no_NO_COLOR(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(cli_mutants.click, "get_text_stream", lambda name: Tty())
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert cli_mutants._use_colour("auto") is True
    monkeypatch.setenv("NO_COLOR", "1")
    assert cli_mutants._use_colour("auto") is False
    monkeypatch.setattr(cli_mutants.click, "get_text_stream", lambda name: io.StringIO())
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert cli_mutants._use_colour("auto") is False


def test_cli_show_unknown_id():
    result = CliRunner().invoke(mutants_group, ["show", "reversal-causal-mask-invertd"])
    assert result.exit_code == 2
    assert "unknown mutant" in result.output and "reversal-causal-mask-inverted" in result.output


def test_cli_export_without_assignment_writes_every_assignments(tmp_path):
    result = CliRunner().invoke(mutants_group, ["export", str(tmp_path)])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert {e["id"] for e in manifest.values()} == {m.id for m in mutants.ALL_MUTANTS}
    counts = {a: len([m for m in mutants.ALL_MUTANTS if m.assignment == a]) for a in mutants.ALL_ASSIGNMENTS}
    assert all(counts.values())
    assert ", ".join(f"{n} {a}" for a, n in counts.items()) in result.output       # it says what it wrote


def test_cli_export(tmp_path):
    out = tmp_path / "subs"
    runner = CliRunner()
    lessons = ["--assignment", "reversal"]     # the files' form (lm's repositories: test_lm_mutants.py)
    result = runner.invoke(mutants_group, ["export", str(out)] + lessons)
    assert result.exit_code == 0, result.output
    files = sorted(p.name for p in out.glob("submission_*.py"))
    ones = [m for m in MUTANTS if m.assignment == "reversal"]
    assert len(files) == len(ones)
    assert all(re.fullmatch(r"submission_\d+\.py", f) for f in files)
    manifest = json.loads((out / "manifest.json").read_text())
    assert sorted(manifest) == files
    assert sorted(e["id"] for e in manifest.values()) == sorted(m.id for m in ones)
    for name, entry in manifest.items():
        m = get(entry["id"])
        assert entry["cause"] == m.cause and entry["assignment"] == m.assignment
        text = (out / name).read_text()
        # the mutant's code, without the reference's docstring (it would say "this is the reference")
        assert text.split('"""', 2)[2].strip() in source(m) and "reference" not in text.split('"""', 2)[1]
    with open(out / "manifest.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["file"]: r["id"] for r in rows} == {k: v["id"] for k, v in manifest.items()}
    # the numbering is a deterministic shuffle, not the registry order
    assert manifest == json.loads((out / "manifest.json").read_text())
    assert [manifest[f]["id"] for f in files] != [m.id for m in ones]
    assert mutants.plan_export(MUTANTS) == mutants.plan_export(MUTANTS)

    # never overwrite without --force, and write nothing at all when refusing
    victim = out / files[0]
    victim.write_text("# a student's work\n")
    refused = runner.invoke(mutants_group, ["export", str(out)] + lessons)
    assert refused.exit_code == 2
    assert "refusing to overwrite" in refused.output
    assert victim.read_text() == "# a student's work\n"
    forced = runner.invoke(mutants_group, ["export", str(out), "--force"] + lessons)
    assert forced.exit_code == 0, forced.output
    assert victim.read_text() != "# a student's work\n"


def test_cli_export_assignment(tmp_path):
    result = CliRunner().invoke(mutants_group, ["export", str(tmp_path), "--assignment", "block"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert {e["assignment"] for e in manifest.values()} == {"block"}
    assert len(manifest) == len(mutants.by_assignment("block"))
