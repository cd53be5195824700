"""The `lm` reference: the adapter contract (names, argument order, state-dict keys),
properties every correct implementation has, agreement with torch's own
functions and optimizer, the trained checkpoint, and both exported forms.
"""
from __future__ import annotations

import inspect
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from reference_model import lm
from reference_model import lm_adapters as A

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = json.loads((ROOT / "reference_model" / "lm_tiny.json").read_text())

# The course's tests/adapters.py, as looked up (public copies): name -> parameters in order.
CONTRACT = {
    "run_linear": ["d_in", "d_out", "weights", "in_features"],
    "run_embedding": ["vocab_size", "d_model", "weights", "token_ids"],
    "run_swiglu": ["d_model", "d_ff", "w1_weight", "w2_weight", "w3_weight", "in_features"],
    "run_scaled_dot_product_attention": ["Q", "K", "V", "mask"],
    "run_multihead_self_attention": ["d_model", "num_heads", "q_proj_weight", "k_proj_weight",
                                     "v_proj_weight", "o_proj_weight", "in_features"],
    "run_multihead_self_attention_with_rope": ["d_model", "num_heads", "max_seq_len", "theta", "q_proj_weight",
                                               "k_proj_weight", "v_proj_weight", "o_proj_weight",
                                               "in_features", "token_positions"],
    "run_rope": ["d_k", "theta", "max_seq_len", "in_query_or_key", "token_positions"],
    "run_transformer_block": ["d_model", "num_heads", "d_ff", "max_seq_len", "theta", "weights", "in_features"],
    "run_transformer_lm": ["vocab_size", "context_length", "d_model", "num_layers", "num_heads", "d_ff",
                           "rope_theta", "weights", "in_indices"],
    "run_rmsnorm": ["d_model", "eps", "weights", "in_features"],
    "run_silu": ["in_features"],
    "run_get_batch": ["dataset", "batch_size", "context_length", "device"],
    "run_softmax": ["in_features", "dim"],
    "run_cross_entropy": ["inputs", "targets"],
    "run_gradient_clipping": ["parameters", "max_l2_norm"],
    "get_adamw_cls": [],
    "run_get_lr_cosine_schedule": ["it", "max_learning_rate", "min_learning_rate", "warmup_iters",
                                   "cosine_cycle_iters"],
    "run_save_checkpoint": ["model", "optimizer", "iteration", "out"],
    "run_load_checkpoint": ["src", "model", "optimizer"],
}
BLOCK_KEYS = {"attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight", "attn.output_proj.weight",
              "ln1.weight", "ffn.w1.weight", "ffn.w2.weight", "ffn.w3.weight", "ln2.weight"}


def _g(seed):
    return torch.Generator().manual_seed(seed)


def _lm():
    model = lm.TransformerLM(**SUMMARY["config"])
    model.load_state_dict(torch.load(ROOT / "reference_model" / "lm_tiny.pt", weights_only=True))
    return model.eval()


def test_adapter_names_and_argument_order():
    for name, params in CONTRACT.items():
        assert list(inspect.signature(getattr(A, name)).parameters) == params, name
    assert inspect.signature(A.run_multihead_self_attention_with_rope).parameters["token_positions"].default is None


def test_state_dict_keys_and_shapes():
    block = lm.TransformerBlock(16, 4, 24, 32, 10000.0)
    assert set(block.state_dict()) == BLOCK_KEYS
    assert block.state_dict()["ffn.w1.weight"].shape == (24, 16) and block.state_dict()["ffn.w2.weight"].shape == (16, 24)
    model = lm.TransformerLM(50, 32, 16, 2, 4, 24, 10000.0)
    expected = {"token_embeddings.weight", "ln_final.weight", "lm_head.weight"} | {
        f"layers.{i}.{k}" for i in range(2) for k in BLOCK_KEYS}
    assert set(model.state_dict()) == expected
    assert model.state_dict()["lm_head.weight"].shape == (50, 16)


def test_components_agree_with_torch():
    x = torch.randn(2, 3, 5, 16, generator=_g(0))
    w = torch.randn(8, 16, generator=_g(1))
    assert torch.allclose(A.run_linear(16, 8, w, x), F.linear(x, w), atol=1e-6)
    emb = torch.randn(10, 16, generator=_g(2))
    ids = torch.tensor([[1, 9], [0, 3]])
    assert torch.equal(A.run_embedding(10, 16, emb, ids), F.embedding(ids, emb))
    assert torch.allclose(A.run_silu(x), F.silu(x), atol=1e-6)
    g = torch.rand(16, generator=_g(3)) + 0.5
    assert torch.allclose(A.run_rmsnorm(16, 1e-5, g, x), F.rms_norm(x, (16,), g, 1e-5), atol=1e-5)
    for dim in (0, 1, -1):
        assert torch.allclose(A.run_softmax(x, dim), torch.softmax(x, dim), atol=1e-6)
    q, k, v = (torch.randn(2, 4, n, 8, generator=_g(4 + n)) for n in (6, 9, 9))
    mask = torch.rand(6, 9, generator=_g(5)) > 0.5
    mask[:, 0] = True
    assert torch.allclose(A.run_scaled_dot_product_attention(q, k, v, mask),
                          F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-5)
    logits, targets = torch.randn(7, 11, generator=_g(6)) * 30, torch.randint(0, 11, (7,), generator=_g(7))
    assert torch.allclose(A.run_cross_entropy(logits, targets), F.cross_entropy(logits, targets), atol=1e-5)


def test_mha_is_causal_attention_over_heads():
    d, h = 16, 4
    x = torch.randn(3, 7, d, generator=_g(8))
    ws = [torch.randn(d, d, generator=_g(9 + i)) / 4 for i in range(4)]
    split = lambda t: t.view(3, 7, h, d // h).transpose(1, 2)                     # noqa: E731
    expected = F.scaled_dot_product_attention(split(x @ ws[0].T), split(x @ ws[1].T), split(x @ ws[2].T),
                                              is_causal=True).transpose(1, 2).reshape(3, 7, d) @ ws[3].T
    assert torch.allclose(A.run_multihead_self_attention(d, h, *ws, x), expected, atol=1e-5)


def _rope(x, positions, theta=10000.0):
    return A.run_rope(x.shape[-1], theta, 64, x, positions)


def test_rope_properties():
    x = torch.randn(2, 6, 8, generator=_g(10))
    zero = torch.zeros(2, 6, dtype=torch.long)
    assert torch.allclose(_rope(x, zero), x)                                     # identity at position 0
    pos = torch.tensor([[3, 5, 9, 10, 11, 40], [0, 1, 2, 3, 4, 5]])
    y = _rope(x, pos)
    assert torch.allclose(y.norm(dim=-1), x.norm(dim=-1), atol=1e-5)            # a rotation
    # complex form: pair (2i, 2i+1) is multiplied by exp(1j * pos * theta^(-2i/d))
    freqs = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    z = torch.view_as_complex(x.double().reshape(2, 6, 4, 2)) * torch.polar(
        torch.ones(2, 6, 4, dtype=torch.float64), pos[..., None].double() * freqs)
    assert torch.allclose(y.double(), torch.view_as_real(z).reshape(2, 6, 8), atol=1e-5)
    # q_m . k_n depends only on m - n: shift every position by 17
    q, k = torch.randn(1, 6, 8, generator=_g(11)), torch.randn(1, 6, 8, generator=_g(12))
    p = torch.tensor([[0, 2, 3, 7, 8, 20]])
    s1 = _rope(q, p) @ _rope(k, p).transpose(-2, -1)
    s2 = _rope(q, p + 17) @ _rope(k, p + 17).transpose(-2, -1)
    assert torch.allclose(s1, s2, atol=1e-4)
    assert not torch.allclose(s1, q @ k.transpose(-2, -1), atol=1e-2)


def test_rmsnorm_properties():
    x = torch.randn(4, 5, 16, generator=_g(13))
    g = torch.rand(16, generator=_g(14)) + 0.5
    y = A.run_rmsnorm(16, 1e-5, g, x)
    assert torch.allclose(A.run_rmsnorm(16, 1e-5, g, 3 * x), y, atol=1e-4)      # scale invariant
    x2 = x.clone()
    x2[0] *= 100
    assert torch.allclose(A.run_rmsnorm(16, 1e-5, g, x2)[1:], y[1:])             # independent across tokens
    big = (torch.randn(3, 16, generator=_g(15)) * 1000).half()
    out = A.run_rmsnorm(16, 1e-5, g.half(), big)
    assert out.dtype == torch.float16 and torch.isfinite(out).all()
    assert torch.allclose(out.float(), F.rms_norm(big.float(), (16,), g, 1e-5), atol=1e-2)


def test_softmax_and_cross_entropy_are_stable():
    x = torch.randn(3, 10, generator=_g(16))
    assert torch.allclose(A.run_softmax(x + 50, -1), A.run_softmax(x, -1), atol=1e-6)
    assert torch.isfinite(A.run_softmax(x * 1000, -1)).all()
    targets = torch.randint(0, 10, (3,), generator=_g(17))
    loss = A.run_cross_entropy(x * 1000, targets)
    assert torch.isfinite(loss) and torch.allclose(loss, F.cross_entropy(x.double() * 1000, targets).float())
    batched = torch.randn(2, 4, 10, generator=_g(18))                            # leading dims: mean over all
    t = torch.randint(0, 10, (2, 4), generator=_g(19))
    assert torch.allclose(A.run_cross_entropy(batched, t), F.cross_entropy(batched.reshape(8, 10), t.reshape(8)))


def test_lm_is_causal_and_block_pre_norm():
    model = _lm()
    ids = torch.randint(0, 64, (1, 16), generator=_g(20))
    with torch.no_grad():
        out = model(ids)
        changed = ids.clone()
        changed[0, 10:] = (changed[0, 10:] + 1) % 64
        out2 = model(changed)
    assert torch.allclose(out[0, :10], out2[0, :10], atol=1e-5)                 # earlier logits unchanged
    assert not torch.allclose(out[0, 10:], out2[0, 10:], atol=1e-3)
    weights = {k[len("layers.0."):]: v for k, v in model.state_dict().items() if k.startswith("layers.0.")}
    x = torch.randn(2, 8, 32, generator=_g(21))
    with torch.no_grad():
        expected = model.layers[0](x)
    assert torch.allclose(A.run_transformer_block(32, 4, 96, 32, 10000.0, weights, x), expected, atol=1e-6)
    full = A.run_transformer_lm(**SUMMARY["config"], weights=model.state_dict(), in_indices=ids)
    assert torch.allclose(full, out, atol=1e-5)


def test_adamw_matches_torch():
    torch.manual_seed(0)
    ours, theirs = torch.nn.Linear(8, 4), torch.nn.Linear(8, 4)
    theirs.load_state_dict(ours.state_dict())
    kwargs = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    opt_ours, opt_theirs = A.get_adamw_cls()(ours.parameters(), **kwargs), torch.optim.AdamW(theirs.parameters(), **kwargs)
    for step in range(50):
        x = torch.randn(16, 8, generator=_g(100 + step))
        for model, opt in ((ours, opt_ours), (theirs, opt_theirs)):
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()
    for a, b in zip(ours.parameters(), theirs.parameters()):
        assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()
    assert not torch.allclose(ours.weight, torch.nn.Linear(8, 4).weight)


def test_gradient_clipping_matches_torch():
    for scale in (10.0, 1e-3):
        ours = [torch.nn.Parameter(torch.zeros(n)) for n in (3, 5, 2)]
        theirs = [torch.nn.Parameter(torch.zeros(n)) for n in (3, 5, 2)]
        for i, (a, b) in enumerate(zip(ours, theirs)):
            if i != 2:                                                  # the last one has no gradient
                a.grad = scale * torch.randn(a.shape, generator=_g(30 + i))
                b.grad = a.grad.clone()
        A.run_gradient_clipping(ours, 1.0)
        torch.nn.utils.clip_grad_norm_(theirs, 1.0)
        for a, b in zip(ours[:2], theirs[:2]):
            assert torch.allclose(a.grad, b.grad, atol=1e-7)
        assert ours[2].grad is None


def test_cosine_schedule_boundaries():
    lr = lambda it: A.run_get_lr_cosine_schedule(it, 1.0, 0.1, 10, 30)        # noqa: E731
    assert lr(0) == 0.0 and lr(5) == pytest.approx(0.5) and lr(10) == pytest.approx(1.0)
    assert lr(20) == pytest.approx(0.55) and lr(30) == pytest.approx(0.1)
    assert lr(31) == lr(1000) == 0.1
    assert all(lr(i) >= lr(i + 1) for i in range(10, 40))


def test_get_batch():
    data = np.arange(50)
    np.random.seed(0)
    x, y = A.run_get_batch(data, 400, 8, "cpu")
    assert x.shape == y.shape == (400, 8) and x.dtype == y.dtype == torch.long and x.device.type == "cpu"
    assert torch.equal(y, x + 1)
    starts = x[:, 0]
    assert int(starts.min()) == 0 and int(starts.max()) == 50 - 8 - 1               # every valid start, no more
    with pytest.raises((RuntimeError, AssertionError)):
        A.run_get_batch(data, 2, 8, "cuda:99")


def test_checkpoint_save_load_round_trip(tmp_path):
    model = lm.TransformerLM(20, 16, 16, 1, 2, 24, 10000.0)
    opt = lm.AdamW(model.parameters())
    model(torch.randint(0, 20, (2, 5))).sum().backward()
    opt.step()
    A.run_save_checkpoint(model, opt, 7, tmp_path / "ck.pt")
    fresh = lm.TransformerLM(20, 16, 16, 1, 2, 24, 10000.0)
    fresh_opt = lm.AdamW(fresh.parameters())
    assert A.run_load_checkpoint(tmp_path / "ck.pt", fresh, fresh_opt) == 7
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), fresh.state_dict().values()))


def test_trained_checkpoint_learned_the_text():
    from reference_model.train_lm import BATCH, copy_accuracy, make_text
    model = _lm()
    assert SUMMARY["val_loss_final"] < SUMMARY["val_loss_initial"] - 2
    text = make_text(5000, np.random.default_rng(123))
    x = torch.as_tensor(np.stack([text[i:i + 32] for i in range(0, 32 * BATCH, 32)]))
    y = torch.as_tensor(np.stack([text[i + 1:i + 33] for i in range(0, 32 * BATCH, 32)]))
    with torch.no_grad():
        loss = float(lm.cross_entropy(model(x), y))
    assert loss < SUMMARY["val_loss_final"] + 0.3, loss                            # well below log(64) = 4.16
    assert copy_accuracy(model, np.random.default_rng(7), n=50) > 0.9


