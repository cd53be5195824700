"""CS336 assignment 1 adapters, written as plain functions on tensors (no nn.Module)."""
import math

import numpy as np
import torch


def run_linear(d_in, d_out, weights, in_features):
    return torch.matmul(in_features, weights.transpose(0, 1))


def run_embedding(vocab_size, d_model, weights, token_ids):
    return torch.index_select(weights, 0, token_ids.reshape(-1)).reshape(*token_ids.shape, d_model)


def run_silu(in_features):
    return in_features / (1 + torch.exp(-in_features))


def run_swiglu(d_model, d_ff, w1_weight, w2_weight, w3_weight, in_features):
    gate = run_silu(run_linear(d_model, d_ff, w1_weight, in_features))
    up = run_linear(d_model, d_ff, w3_weight, in_features)
    return run_linear(d_ff, d_model, w2_weight, gate * up)


def run_rmsnorm(d_model, eps, weights, in_features):
    x = in_features.to(torch.float32)
    ms = (x * x).sum(dim=-1, keepdim=True) / d_model
    return (weights * (x / torch.sqrt(ms + eps))).to(in_features.dtype)


def run_softmax(in_features, dim):
    z = in_features - torch.max(in_features, dim=dim, keepdim=True)[0]
    return torch.exp(z) / torch.exp(z).sum(dim=dim, keepdim=True)


def run_scaled_dot_product_attention(Q, K, V, mask=None):
    scores = torch.matmul(Q, K.transpose(-2, -1)) * (1.0 / math.sqrt(K.shape[-1]))
    if mask is not None:
        scores = scores + torch.where(mask, 0.0, -math.inf)
    return torch.matmul(run_softmax(scores, -1), V)


def run_rope(d_k, theta, max_seq_len, in_query_or_key, token_positions):
    k = torch.arange(d_k // 2, dtype=torch.float32)
    positions = torch.arange(in_query_or_key.shape[-2])
    angle = positions.unsqueeze(-1).float() / theta ** (2 * k / d_k)  # (seq, d_k/2)
    c, s = torch.cos(angle), torch.sin(angle)
    x1 = in_query_or_key[..., 0::2]
    x2 = in_query_or_key[..., 1::2]
    out = torch.empty_like(in_query_or_key)
    out[..., 0::2] = x1 * c - x2 * s
    out[..., 1::2] = x1 * s + x2 * c
    return out


def _heads(x, h):
    *lead, s, d = x.shape
    return x.reshape(*lead, s, h, d // h).movedim(-2, -3)  # (..., h, s, d/h)


def _merge(x):
    x = x.movedim(-3, -2)  # (..., s, h, d/h)
    return x.reshape(*x.shape[:-2], -1)


def _attention(d_model, num_heads, wq, wk, wv, wo, x, theta=None, max_seq_len=None, positions=None):
    seq = x.shape[-2]
    q, k, v = (_heads(run_linear(d_model, d_model, w, x), num_heads) for w in (wq, wk, wv))
    if theta is not None:
        if positions is None:
            positions = torch.arange(seq)
        positions = positions.unsqueeze(-2)  # one set of positions for all heads
        q = run_rope(d_model // num_heads, theta, max_seq_len, q, positions)
        k = run_rope(d_model // num_heads, theta, max_seq_len, k, positions)
    causal = torch.arange(seq)[:, None] >= torch.arange(seq)[None, :]
    out = run_scaled_dot_product_attention(q, k, v, causal)
    return run_linear(d_model, d_model, wo, _merge(out))


def run_multihead_self_attention(d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight,
                                 o_proj_weight, in_features):
    return _attention(d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight,
                      in_features)


def run_multihead_self_attention_with_rope(d_model, num_heads, max_seq_len, theta, q_proj_weight,
                                           k_proj_weight, v_proj_weight, o_proj_weight, in_features,
                                           token_positions=None):
    return _attention(d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight,
                      in_features, theta, max_seq_len, token_positions)


def run_transformer_block(d_model, num_heads, d_ff, max_seq_len, theta, weights, in_features):
    w = weights
    h = run_rmsnorm(d_model, 1e-5, w["ln1.weight"], in_features)
    x = in_features + _attention(d_model, num_heads, w["attn.q_proj.weight"], w["attn.k_proj.weight"],
                                 w["attn.v_proj.weight"], w["attn.output_proj.weight"], h, theta, max_seq_len)
    h = run_rmsnorm(d_model, 1e-5, w["ln2.weight"], x)
    return x + run_swiglu(d_model, d_ff, w["ffn.w1.weight"], w["ffn.w2.weight"], w["ffn.w3.weight"], h)


def run_transformer_lm(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta,
                       weights, in_indices):
    x = run_embedding(vocab_size, d_model, weights["token_embeddings.weight"], in_indices)
    for i in range(num_layers):
        prefix = f"layers.{i}."
        layer = {k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)}
        x = run_transformer_block(d_model, num_heads, d_ff, context_length, rope_theta, layer, x)
    x = run_rmsnorm(d_model, 1e-5, weights["ln_final.weight"], x)
    return run_linear(d_model, vocab_size, weights["lm_head.weight"], x)


def run_cross_entropy(inputs, targets):
    m = inputs.max(dim=-1, keepdim=True).values
    lse = m.squeeze(-1) + torch.log(torch.exp(inputs - m).sum(dim=-1))
    picked = torch.gather(inputs, -1, targets[..., None])[..., 0]
    return torch.mean(lse - picked)


def run_gradient_clipping(parameters, max_l2_norm):
    parameters = list(parameters)
    sq = 0.0
    for p in parameters:
        if p.grad is not None:
            sq += p.grad.pow(2).sum().item()
    norm = math.sqrt(sq)
    if norm >= max_l2_norm:
        for p in parameters:
            if p.grad is not None:
                p.grad *= max_l2_norm / (norm + 1e-6)


class _AdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure else None
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                s = self.state[p]
                if "t" not in s:
                    s["t"], s["m"], s["v"] = 0, torch.zeros_like(p), torch.zeros_like(p)
                s["t"] += 1
                s["m"] = b1 * s["m"] + (1 - b1) * p.grad
                s["v"] = b2 * s["v"] + (1 - b2) * p.grad * p.grad
                lr_t = group["lr"] * math.sqrt(1 - b2 ** s["t"]) / (1 - b1 ** s["t"])
                p.data = p.data - lr_t * s["m"] / (s["v"].sqrt() + group["eps"])
                p.data = p.data - group["lr"] * group["weight_decay"] * p.data
        return loss


def get_adamw_cls():
    return _AdamW


def run_get_lr_cosine_schedule(it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters):
    if it < warmup_iters:
        return max_learning_rate * it / warmup_iters
    if it > cosine_cycle_iters:
        return min_learning_rate
    progress = (it - warmup_iters) / (cosine_cycle_iters - warmup_iters)
    return min_learning_rate + (max_learning_rate - min_learning_rate) * 0.5 * (1 + math.cos(math.pi * progress))


def run_get_batch(dataset, batch_size, context_length, device):
    data = torch.from_numpy(np.asarray(dataset, dtype=np.int64))
    starts = torch.randint(0, data.numel() - context_length, (batch_size, 1))
    idx = starts + torch.arange(context_length)  # (B, m)
    return data[idx].to(device), data[idx + 1].to(device)
