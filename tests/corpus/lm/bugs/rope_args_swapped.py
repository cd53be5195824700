"""Assignment 1 adapters on top of torch.nn's own modules, loaded with load_state_dict;
my RoPE builds one 2x2 rotation matrix per position and frequency."""
import math

import numpy as np
import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        orig = x.dtype
        x = x.to(torch.float32)
        norm = torch.sqrt(torch.mean(x ** 2, dim=-1, keepdim=True) + self.eps)
        return (x / norm * self.weight).to(orig)


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)
        self.w3 = nn.Linear(d_model, d_ff, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))


class RotaryEmbedding(nn.Module):
    def __init__(self, theta, d_k, max_seq_len):
        super().__init__()
        i = torch.arange(d_k // 2, dtype=torch.float64)
        ang = torch.arange(max_seq_len, dtype=torch.float64)[:, None] * theta ** (-2 * i / d_k)
        c, s = torch.cos(ang), torch.sin(ang)
        R = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (L, d/2, 2, 2)
        self.register_buffer("R", R.float(), persistent=False)

    def forward(self, x, token_positions):
        pairs = x.unflatten(-1, (-1, 2))  # (..., seq, d/2, 2)
        rot = self.R[token_positions]  # (..., seq, d/2, 2, 2)
        return torch.einsum("...ij,...j->...i", rot, pairs).flatten(-2)


def softmax(x, dim=-1):
    x = x - x.max(dim=dim, keepdim=True)[0]
    x = x.exp()
    return x / x.sum(dim=dim, keepdim=True)


def sdpa(q, k, v, mask=None):
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    if mask is not None:
        att = att.masked_fill(mask == False, float("-inf"))  # noqa: E712
    return softmax(att, dim=-1) @ v


class Attention(nn.Module):
    def __init__(self, d_model, n_heads, rope=None):
        super().__init__()
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.output_proj = nn.Linear(d_model, d_model, bias=False)
        self.rope = rope

    def forward(self, x, token_positions=None):
        *b, t, d = x.size()
        q = self.q_proj(x).view(*b, t, self.n_heads, self.d_head).transpose(-3, -2)
        k = self.k_proj(x).view(*b, t, self.n_heads, self.d_head).transpose(-3, -2)
        v = self.v_proj(x).view(*b, t, self.n_heads, self.d_head).transpose(-3, -2)
        if self.rope is not None:
            if token_positions is None:
                token_positions = torch.arange(t)
            q = self.rope(q, token_positions.unsqueeze(-2))
            k = self.rope(k, token_positions.unsqueeze(-2))
        mask = torch.tril(torch.ones(t, t)).bool()
        y = sdpa(q, k, v, mask)
        y = y.transpose(-3, -2).contiguous().view(*b, t, d)
        return self.output_proj(y)


class Block(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, max_seq_len, theta):
        super().__init__()
        self.ln1 = RMSNorm(d_model)
        self.attn = Attention(d_model, num_heads, RotaryEmbedding(theta, d_model // num_heads, max_seq_len))
        self.ln2 = RMSNorm(d_model)
        self.ffn = FeedForward(d_model, d_ff)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.ffn(self.ln2(x))
        return x


class LM(nn.Module):
    def __init__(self, vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta):
        super().__init__()
        self.token_embeddings = nn.Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList([Block(d_model, num_heads, d_ff, context_length, rope_theta)
                                     for _ in range(num_layers)])
        self.ln_final = RMSNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, idx):
        h = self.token_embeddings(idx)
        for blk in self.layers:
            h = blk(h)
        return self.lm_head(self.ln_final(h))


def run_linear(d_in, d_out, weights, in_features):
    lin = nn.Linear(d_in, d_out, bias=False)
    lin.load_state_dict({"weight": weights})
    return lin(in_features)


def run_embedding(vocab_size, d_model, weights, token_ids):
    emb = nn.Embedding(vocab_size, d_model)
    emb.load_state_dict({"weight": weights})
    return emb(token_ids)


def run_silu(in_features):
    return nn.functional.silu(in_features)


def run_swiglu(d_model, d_ff, w1_weight, w2_weight, w3_weight, in_features):
    ff = FeedForward(d_model, d_ff)
    ff.load_state_dict({"w1.weight": w1_weight, "w2.weight": w2_weight, "w3.weight": w3_weight})
    return ff(in_features)


def run_rmsnorm(d_model, eps, weights, in_features):
    ln = RMSNorm(d_model, eps)
    ln.load_state_dict({"weight": weights})
    return ln(in_features)


def run_softmax(in_features, dim):
    return softmax(in_features, dim)


def run_scaled_dot_product_attention(Q, K, V, mask=None):
    return sdpa(Q, K, V, mask)


def run_rope(d_k, theta, max_seq_len, in_query_or_key, token_positions):
    return RotaryEmbedding(max_seq_len, d_k, theta)(in_query_or_key, token_positions)


def _attn_state(q, k, v, o):
    return {"q_proj.weight": q, "k_proj.weight": k, "v_proj.weight": v, "output_proj.weight": o}


def run_multihead_self_attention(d_model, num_heads, q_proj_weight, k_proj_weight, v_proj_weight,
                                 o_proj_weight, in_features):
    attn = Attention(d_model, num_heads)
    attn.load_state_dict(_attn_state(q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight))
    return attn(in_features)


def run_multihead_self_attention_with_rope(d_model, num_heads, max_seq_len, theta, q_proj_weight,
                                           k_proj_weight, v_proj_weight, o_proj_weight, in_features,
                                           token_positions=None):
    attn = Attention(d_model, num_heads, RotaryEmbedding(theta, d_model // num_heads, max_seq_len))
    attn.load_state_dict(_attn_state(q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight))
    return attn(in_features, token_positions)


def run_transformer_block(d_model, num_heads, d_ff, max_seq_len, theta, weights, in_features):
    block = Block(d_model, num_heads, d_ff, max_seq_len, theta)
    block.load_state_dict(weights)
    return block(in_features)


def run_transformer_lm(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta,
                       weights, in_indices):
    model = LM(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta)
    model.load_state_dict(weights)
    return model(in_indices)


def run_cross_entropy(inputs, targets):
    shifted = inputs - inputs.max(dim=-1, keepdim=True).values
    log_probs = shifted - shifted.exp().sum(dim=-1, keepdim=True).log()
    nll = -log_probs.gather(dim=-1, index=targets.unsqueeze(-1))
    return nll.mean()


def run_gradient_clipping(parameters, max_l2_norm):
    params = [p for p in parameters if p.grad is not None]
    total_norm = torch.stack([p.grad.norm(2) for p in params]).norm(2)
    clip = max_l2_norm / (total_norm + 1e-6)
    if clip < 1:
        for p in params:
            p.grad.mul_(clip)


class AdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["m"] = torch.zeros_like(p)
                    state["v"] = torch.zeros_like(p)
                state["step"] += 1
                t = state["step"]
                beta1, beta2 = group["betas"]
                state["m"].mul_(beta1).add_(p.grad, alpha=1 - beta1)
                state["v"].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                step_size = group["lr"] * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
                p.addcdiv_(state["m"], state["v"].sqrt().add_(group["eps"]), value=-step_size)
                p.mul_(1 - group["lr"] * group["weight_decay"])
        return None if closure is None else closure()


def get_adamw_cls():
    return AdamW


def run_get_lr_cosine_schedule(it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters):
    if it < warmup_iters:
        return it / warmup_iters * max_learning_rate
    elif it <= cosine_cycle_iters:
        decay_ratio = (it - warmup_iters) / (cosine_cycle_iters - warmup_iters)
        coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
        return min_learning_rate + coeff * (max_learning_rate - min_learning_rate)
    else:
        return min_learning_rate


def run_get_batch(dataset, batch_size, context_length, device):
    ix = torch.randint(len(dataset) - context_length, (batch_size,))
    x = torch.stack([torch.from_numpy(dataset[i:i + context_length].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(dataset[i + 1:i + 1 + context_length].astype(np.int64)) for i in ix])
    return x.to(device), y.to(device)
