"""A Transformer language model: linear and embedding layers, RMSNorm, SwiGLU, attention with RoPE,
the LM, and its loss, optimizer, schedule and batches."""
import math

import numpy as np
import torch
import torch.nn as nn


class Linear(nn.Module):
    """y = x W^T without bias; W is (d_out, d_in) like nn.Linear."""

    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__()
        std = math.sqrt(2.0 / (in_features + out_features))
        weight = torch.empty(out_features, in_features, device=device, dtype=dtype)
        nn.init.trunc_normal_(weight, mean=0.0, std=std, a=-3 * std, b=3 * std)
        self.weight = nn.Parameter(weight)                          # (d_out, d_in)

    def forward(self, x):
        return x @ self.weight.T                                    # (..., d_in) -> (..., d_out)


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        weight = torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype)
        nn.init.trunc_normal_(weight, mean=0.0, std=1.0, a=-3.0, b=3.0)
        self.weight = nn.Parameter(weight)                          # (vocab, d_model)

    def forward(self, token_ids):
        return self.weight[token_ids]                               # (...) -> (..., d_model)


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))  # (d_model,)

    def forward(self, x):
        in_dtype = x.dtype
        x = x.to(torch.float32)  # squares of half-precision activations overflow
        rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)  # (..., 1)
        return (x / rms * self.weight).to(in_dtype)


def silu(x):
    return x * torch.sigmoid(x)


class SwiGLU(nn.Module):
    """w2(silu(w1 x) * w3 x): the gate is silu of w1's branch, w3's branch is linear."""

    def __init__(self, d_model, d_ff, device=None, dtype=None):
        super().__init__()
        self.w1 = Linear(d_model, d_ff, device=device, dtype=dtype)   # (d_ff, d_model)
        self.w2 = Linear(d_ff, d_model, device=device, dtype=dtype)   # (d_model, d_ff)
        self.w3 = Linear(d_model, d_ff, device=device, dtype=dtype)   # (d_ff, d_model)

    def forward(self, x):
        return self.w2(silu(self.w1(x)) * self.w3(x))


def softmax(x, dim):
    x = x - x.amax(dim=dim, keepdim=True)  # the largest logit becomes 0: exp never overflows
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def scaled_dot_product_attention(q, k, v, mask=None):
    """q (..., queries, d_k), k (..., keys, d_k), v (..., keys, d_v); mask True = may attend."""
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)               # (..., queries, keys)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))           # masked keys get weight exactly 0
    weights = softmax(scores, dim=-1)                               # each query's row sums to 1 over the keys
    return weights @ v                                              # (..., queries, d_v)


class RotaryPositionalEmbedding(nn.Module):
    """RoPE: rotates each pair (x[2i], x[2i+1]) by angle position * theta^(-2i/d_k)."""

    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__()
        inv_freq = 1.0 / theta ** (torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)  # (d_k/2,)
        positions = torch.arange(max_seq_len, dtype=torch.float64)                      # (max_seq_len,)
        angles = torch.outer(positions, inv_freq)                                       # (max_seq_len, d_k/2)
        self.register_buffer("cos", angles.cos().float().to(device), persistent=False)
        self.register_buffer("sin", angles.sin().float().to(device), persistent=False)

    def forward(self, x, token_positions):
        cos = self.cos[token_positions]                             # (..., seq, d_k/2)
        sin = self.sin[token_positions]
        x1, x2 = x[..., 0::2], x[..., 1::2]                         # the pairs (2i, 2i+1)
        rot1 = x1 * cos - x2 * sin
        rot2 = x1 * sin + x2 * cos
        return torch.stack((rot1, rot2), dim=-1).flatten(-2).to(x.dtype)  # interleave back: (..., seq, d_k)


class MultiHeadSelfAttention(nn.Module):
    """Causal multi-head self-attention; RoPE (if given) on queries and keys only."""

    def __init__(self, d_model, num_heads, rope=None, device=None, dtype=None):
        super().__init__()
        assert d_model % num_heads == 0
        self.d_model, self.num_heads, self.d_head = d_model, num_heads, d_model // num_heads
        self.q_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.k_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.v_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.output_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.rope = rope

    def _split_heads(self, t):
        *lead, seq, _ = t.shape
        return t.view(*lead, seq, self.num_heads, self.d_head).transpose(-3, -2)  # (..., heads, seq, d_head)

    def forward(self, x, token_positions=None):
        *lead, seq, _ = x.shape
        q = self._split_heads(self.q_proj(x))
        k = self._split_heads(self.k_proj(x))
        v = self._split_heads(self.v_proj(x))
        if self.rope is not None:
            if token_positions is None:
                token_positions = torch.arange(seq, device=x.device)
            positions = token_positions.unsqueeze(-2)               # (..., 1, seq): every head, same positions
            q = self.rope(q, positions)
            k = self.rope(k, positions)
        causal = torch.tril(torch.ones(seq, seq, dtype=torch.bool, device=x.device))  # (seq, seq) key j <= query i
        out = scaled_dot_product_attention(q, k, v, causal)         # (..., heads, seq, d_head)
        out = out.transpose(-3, -2).reshape(*lead, seq, self.d_model)  # heads back next to each other
        return self.output_proj(out)


class TransformerBlock(nn.Module):
    """Pre-norm: x + attn(ln1(x)), then + ffn(ln2(x)); the residual stream itself is never normalised."""

    def __init__(self, d_model, num_heads, d_ff, max_seq_len, theta, device=None, dtype=None):
        super().__init__()
        rope = RotaryPositionalEmbedding(theta, d_model // num_heads, max_seq_len, device=device)
        self.ln1 = RMSNorm(d_model, device=device, dtype=dtype)
        self.attn = MultiHeadSelfAttention(d_model, num_heads, rope, device=device, dtype=dtype)
        self.ln2 = RMSNorm(d_model, device=device, dtype=dtype)
        self.ffn = SwiGLU(d_model, d_ff, device=device, dtype=dtype)

    def forward(self, x, token_positions=None):
        x = x + self.attn(self.ln1(x), token_positions)             # (batch, seq, d_model)
        x = x + self.ffn(self.ln2(x))
        return x


class TransformerLM(nn.Module):
    def __init__(self, vocab_size, context_length, d_model, num_layers, num_heads, d_ff,
                 rope_theta, device=None, dtype=None):
        super().__init__()
        self.context_length = context_length
        self.token_embeddings = Embedding(vocab_size, d_model, device=device, dtype=dtype)
        self.layers = nn.ModuleList(
            TransformerBlock(d_model, num_heads, d_ff, context_length, rope_theta, device=device, dtype=dtype)
            for _ in range(num_layers))
        self.ln_final = RMSNorm(d_model, device=device, dtype=dtype)
        self.lm_head = Linear(d_model, vocab_size, device=device, dtype=dtype)

    def forward(self, token_ids):
        x = self.token_embeddings(token_ids)                        # (batch, seq, d_model)
        for layer in self.layers:
            x = layer(x)
        x = self.ln_final(x)
        return self.lm_head(x)                                      # (batch, seq, vocab): logits, not probabilities


def cross_entropy(logits, targets):
    """Mean over every leading position of logsumexp(logits) - logits[target]."""
    logits = logits - logits.amax(dim=-1, keepdim=True)             # (..., vocab), stable
    log_z = torch.log(torch.exp(logits).sum(dim=-1))                # (...,) logsumexp
    target_logit = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (...,)
    return (log_z - target_logit).mean()


def clip_gradients(parameters, max_l2_norm, eps=1e-6):
    """Scale every gradient by one factor so that their joint L2 norm is at most max_l2_norm."""
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return
    total = torch.sqrt(sum((g.detach().float() ** 2).sum() for g in grads))  # one norm over all of them
    if total > max_l2_norm:
        scale = max_l2_norm / (total + eps)
        for g in grads:
            g.mul_(scale)


class AdamW(torch.optim.Optimizer):
    """Adam with decoupled weight decay (Loshchilov & Hutter) and bias correction."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        if lr < 0:
            raise ValueError(f"invalid learning rate {lr}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                state = self.state[p]
                if not state:
                    state["t"] = 0
                    state["m"] = torch.zeros_like(p)
                    state["v"] = torch.zeros_like(p)
                state["t"] += 1
                t, m, v = state["t"], state["m"], state["v"]
                m.mul_(beta1).add_(grad, alpha=1 - beta1)                     # first moment
                v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)          # second moment
                alpha_t = lr * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)  # bias correction
                p.mul_(1 - lr * wd)                                           # decoupled decay, scaled by lr
                p.addcdiv_(m, v.sqrt().add_(eps), value=-alpha_t)
        return loss


def cosine_lr(it, max_lr, min_lr, warmup_iters, cosine_cycle_iters):
    """Linear warmup from 0 to max_lr over warmup_iters, cosine down to min_lr at cosine_cycle_iters, then min_lr."""
    if it < warmup_iters:
        return it / warmup_iters * max_lr
    if it > cosine_cycle_iters:
        return min_lr
    progress = (it - warmup_iters) / (cosine_cycle_iters - warmup_iters)  # 0 -> 1 over the cosine part
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)


def get_batch(dataset, batch_size, context_length, device):
    """batch_size random windows of the 1-D token array; targets are the inputs shifted by one."""
    starts = np.random.randint(0, len(dataset) - context_length, size=batch_size)  # room for the last label
    x = np.stack([dataset[s:s + context_length] for s in starts])                  # (batch, context)
    y = np.stack([dataset[s + 1:s + 1 + context_length] for s in starts])          # (batch, context)
    return (torch.as_tensor(x, dtype=torch.long, device=device),
            torch.as_tensor(y, dtype=torch.long, device=device))
