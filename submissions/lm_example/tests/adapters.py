"""Adapters: the course tests call these; they wrap our modules."""
from __future__ import annotations

import torch

from cs336_basics.model import (
    AdamW, Embedding, Linear, MultiHeadSelfAttention, RMSNorm, RotaryPositionalEmbedding, SwiGLU,
    TransformerBlock, TransformerLM, clip_gradients, cosine_lr, cross_entropy, get_batch,
    scaled_dot_product_attention, silu, softmax,
)


def _loaded(module, state_dict):
    """The module with these weights, on their device and in their dtype (strict: every key)."""
    first = next(iter(state_dict.values()))
    module.load_state_dict(state_dict)
    return module.to(device=first.device, dtype=first.dtype)


def run_linear(d_in, d_out, weights, in_features):
    return _loaded(Linear(d_in, d_out), {"weight": weights})(in_features)


def run_embedding(vocab_size, d_model, weights, token_ids):
    return _loaded(Embedding(vocab_size, d_model), {"weight": weights})(token_ids)


def run_swiglu(d_model, d_ff, w1_weight, w2_weight, w3_weight, in_features):
    ffn = SwiGLU(d_model, d_ff)
    return _loaded(ffn, {"w1.weight": w1_weight, "w2.weight": w2_weight, "w3.weight": w3_weight})(in_features)


def run_scaled_dot_product_attention(Q, K, V, mask=None):
    return scaled_dot_product_attention(Q, K, V, mask)


def _mha(d_model, num_heads, rope, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight):
    attn = MultiHeadSelfAttention(d_model, num_heads, rope)
    return _loaded(attn, {"q_proj.weight": q_proj_weight, "k_proj.weight": k_proj_weight,
                          "v_proj.weight": v_proj_weight, "output_proj.weight": o_proj_weight})


def run_multihead_self_attention(d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight,
                                 o_proj_weight, in_features):
    attn = _mha(d_model, num_heads, None, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight)
    return attn(in_features)


def run_multihead_self_attention_with_rope(d_model, num_heads, max_seq_len, theta, q_proj_weight,
                                           k_proj_weight, v_proj_weight, o_proj_weight, in_features,
                                           token_positions=None):
    rope = RotaryPositionalEmbedding(theta, d_model // num_heads, max_seq_len, device=in_features.device)
    attn = _mha(d_model, num_heads, rope, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight)
    return attn(in_features, token_positions)


def run_rope(d_k, theta, max_seq_len, in_query_or_key, token_positions):
    rope = RotaryPositionalEmbedding(theta, d_k, max_seq_len, device=in_query_or_key.device)
    return rope(in_query_or_key, token_positions)


def run_transformer_block(d_model, num_heads, d_ff, max_seq_len, theta, weights, in_features):
    block = TransformerBlock(d_model, num_heads, d_ff, max_seq_len, theta)
    return _loaded(block, weights)(in_features)


def run_transformer_lm(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta,
                       weights, in_indices):
    lm = TransformerLM(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta)
    return _loaded(lm, weights)(in_indices)


def run_rmsnorm(d_model, eps, weights, in_features):
    return _loaded(RMSNorm(d_model, eps=eps), {"weight": weights})(in_features)


def run_silu(in_features):
    return silu(in_features)


def run_get_batch(dataset, batch_size, context_length, device):
    return get_batch(dataset, batch_size, context_length, device)


def run_softmax(in_features, dim):
    return softmax(in_features, dim)


def run_cross_entropy(inputs, targets):
    return cross_entropy(inputs, targets)


def run_gradient_clipping(parameters, max_l2_norm):
    clip_gradients(parameters, max_l2_norm)


def get_adamw_cls():
    return AdamW


def run_get_lr_cosine_schedule(it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters):
    return cosine_lr(it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters)


def run_save_checkpoint(model, optimizer, iteration, out):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "iteration": iteration}, out)


def run_load_checkpoint(src, model, optimizer):
    state = torch.load(src, weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return state["iteration"]
