"""Lesson 01's block with a symmetric distance bias and the usual causal mask: each head adds -slope * |i - j|
to its scores (a geometric series of slopes), then a causal block masks the keys ahead with -inf, so only the
past half of the bias is ever read (it equals ALiBi's). Without the causal flag the attention is plain (no
bias, no mask). Unbatched (seq, d_model) input, fused qkv, post-norm."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def alibi_slopes(n_heads):
    # head h gets 2^(-8 (h + 1) / n_heads): the first heads forget quickly, the last ones slowly
    return torch.tensor([2.0 ** (-8.0 * (h + 1) / n_heads) for h in range(n_heads)])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.register_buffer("slopes", alibi_slopes(n_heads).view(n_heads, 1, 1))

    def distance_bias(self, seq_len, device):
        pos = torch.arange(seq_len, device=device)
        dist = (pos[:, None] - pos[None, :]).abs().float()    # |i - j|
        return -self.slopes * dist                            # (heads, seq, seq)

    def forward(self, x, causal=False):
        T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)
        q, k, v = (t.view(T, self.n_heads, self.d_head).permute(1, 0, 2) for t in (q, k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.d_head)       # (heads, seq, seq)
        if causal:
            scores = scores + self.distance_bias(T, x.device)
            ahead = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
            scores = scores.masked_fill(ahead, float("-inf"))
        att = F.softmax(scores, dim=-1)
        y = (att @ v).permute(1, 0, 2).reshape(T, D)
        return self.out(y)


def positional_encoding(seq_len, d_model):
    pos = torch.arange(seq_len, dtype=torch.float32).unsqueeze(1)
    freq = torch.pow(10000.0, -torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    pe = torch.zeros(seq_len, d_model)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)
    return pe


class TransformerBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, causal=False):
        super().__init__()
        self.causal = causal
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.ln1 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.ln2 = nn.LayerNorm(d_model)

    def forward(self, x, causal=None):
        causal = self.causal if causal is None else causal
        x = self.ln1(x + self.attn(x, causal=causal))
        return self.ln2(x + self.mlp(x))
