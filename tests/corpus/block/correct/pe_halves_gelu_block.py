"""Self-attention and a post-norm transformer block with a causal switch."""
import math

import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x, causal=False):
        n, d = x.shape
        q = self.query(x).view(n, self.n_heads, self.head_dim).permute(1, 0, 2)
        k = self.key(x).view(n, self.n_heads, self.head_dim).permute(1, 0, 2)
        v = self.value(x).view(n, self.n_heads, self.head_dim).permute(1, 0, 2)
        scores = torch.matmul(q, k.transpose(1, 2)) / math.sqrt(self.head_dim)
        if causal:
            allowed = torch.tril(torch.ones(n, n, dtype=torch.bool, device=x.device))
            scores = scores.masked_fill(~allowed, float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        mixed = torch.matmul(attn, v).permute(1, 0, 2).reshape(n, d)
        return self.proj(mixed)


def positional_encoding(seq_len, d_model):
    pos = torch.arange(seq_len, dtype=torch.float32).unsqueeze(1)
    inv_freq = 1.0 / (10000 ** (torch.arange(0, d_model, 2, dtype=torch.float32) / d_model))
    angles = pos * inv_freq
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)


class TransformerBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, causal=False):
        super().__init__()
        self.causal = causal
        self.attention = MultiHeadAttention(d_model, n_heads)
        self.ln_attn = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.ln_mlp = nn.LayerNorm(d_model)

    def forward(self, x, causal=None):
        use_mask = self.causal if causal is None else causal
        x = self.ln_attn(x + self.attention(x, causal=use_mask))
        return self.ln_mlp(x + self.mlp(x))
