"""The adapters written with torch's own building blocks (F.linear, F.rms_norm,
F.scaled_dot_product_attention, F.cross_entropy, torch.optim.AdamW, clip_grad_norm_) and
RoPE as an explicit block-diagonal rotation matrix. Not a submission: the yardstick the
corpus's correct entries are checked against."""
import math

import numpy as np
import torch
import torch.nn.functional as F


def run_linear(d_in, d_out, weights, in_features):
    return F.linear(in_features, weights)


def run_embedding(vocab_size, d_model, weights, token_ids):
    return F.embedding(token_ids, weights)


def run_silu(in_features):
    return F.silu(in_features)


def run_swiglu(d_model, d_ff, w1_weight, w2_weight, w3_weight, in_features):
    return F.linear(F.silu(F.linear(in_features, w1_weight)) * F.linear(in_features, w3_weight), w2_weight)


def run_rmsnorm(d_model, eps, weights, in_features):
    x = in_features.float()
    return F.rms_norm(x, (d_model,), weights.float(), eps).to(in_features.dtype)


def run_softmax(in_features, dim):
    return torch.softmax(in_features, dim=dim)


def run_scaled_dot_product_attention(Q, K, V, mask=None):
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)


def _rotation(d_k, theta, pos):
    # R[p] is block-diagonal with 2x2 blocks [[cos, -sin], [sin, cos]] on pairs (2i, 2i+1)
    R = torch.zeros(d_k, d_k, dtype=torch.float64)
    for i in range(d_k // 2):
        a = pos * theta ** (-2 * i / d_k)
        R[2 * i, 2 * i], R[2 * i, 2 * i + 1] = math.cos(a), -math.sin(a)
        R[2 * i + 1, 2 * i], R[2 * i + 1, 2 * i + 1] = math.sin(a), math.cos(a)
    return R


def run_rope(d_k, theta, max_seq_len, in_query_or_key, token_positions):
    pos = torch.as_tensor(token_positions).expand(in_query_or_key.shape[:-1])
    Rs = torch.stack([_rotation(d_k, theta, int(p)) for p in pos.reshape(-1)])  # (N, d, d)
    x = in_query_or_key.double().reshape(-1, d_k, 1)
    return (Rs @ x).reshape(in_query_or_key.shape).to(in_query_or_key.dtype)


def _mha(d_model, h, wq, wk, wv, wo, x, theta=None, pos=None):
    *lead, s, _ = x.shape
    split = lambda t: t.reshape(*lead, s, h, d_model // h).transpose(-2, -3)  # (..., h, s, dh)
    q, k, v = split(F.linear(x, wq)), split(F.linear(x, wk)), split(F.linear(x, wv))
    if theta is not None:
        pos = torch.arange(s) if pos is None else pos
        pos = torch.as_tensor(pos).unsqueeze(-2).expand(*q.shape[:-1])
        q = run_rope(d_model // h, theta, None, q, pos)
        k = run_rope(d_model // h, theta, None, k, pos)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F.linear(o.transpose(-2, -3).reshape(*lead, s, d_model), wo)


def run_multihead_self_attention(d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight,
                                 o_proj_weight, in_features):
    return _mha(d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, in_features)


def run_multihead_self_attention_with_rope(d_model, num_heads, max_seq_len, theta, q_proj_weight,
                                           k_proj_weight, v_proj_weight, o_proj_weight, in_features,
                                           token_positions=None):
    return _mha(d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight,
                in_features, theta, token_positions)


def run_transformer_block(d_model, num_heads, d_ff, max_seq_len, theta, weights, in_features, p=""):
    w = lambda n: weights[p + n]
    x = in_features
    a = _mha(d_model, num_heads, w("attn.q_proj.weight"), w("attn.k_proj.weight"), w("attn.v_proj.weight"),
             w("attn.output_proj.weight"), run_rmsnorm(d_model, 1e-5, w("ln1.weight"), x), theta)
    x = x + a
    return x + run_swiglu(d_model, d_ff, w("ffn.w1.weight"), w("ffn.w2.weight"), w("ffn.w3.weight"),
                          run_rmsnorm(d_model, 1e-5, w("ln2.weight"), x))


def run_transformer_lm(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta,
                       weights, in_indices):
    x = F.embedding(in_indices, weights["token_embeddings.weight"])
    for i in range(num_layers):
        x = run_transformer_block(d_model, num_heads, d_ff, context_length, rope_theta, weights, x, f"layers.{i}.")
    return F.linear(run_rmsnorm(d_model, 1e-5, weights["ln_final.weight"], x), weights["lm_head.weight"])


def run_cross_entropy(inputs, targets):
    return F.cross_entropy(inputs, targets)


def run_gradient_clipping(parameters, max_l2_norm):
    torch.nn.utils.clip_grad_norm_(parameters, max_l2_norm)


def get_adamw_cls():
    return torch.optim.AdamW


def run_get_lr_cosine_schedule(it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters):
    if it < warmup_iters:
        return max_learning_rate * it / warmup_iters
    if it > cosine_cycle_iters:
        return min_learning_rate
    c = math.cos(math.pi * (it - warmup_iters) / (cosine_cycle_iters - warmup_iters))
    return min_learning_rate + 0.5 * (1 + c) * (max_learning_rate - min_learning_rate)


def run_get_batch(dataset, batch_size, context_length, device):
    starts = torch.randint(0, len(dataset) - context_length, (batch_size,))
    idx = starts[:, None] + torch.arange(context_length + 1)
    win = torch.as_tensor(np.asarray(dataset), dtype=torch.long)[idx]
    return win[:, :-1].to(device), win[:, 1:].to(device)
