# Self-attention and a transformer block "from scratch": one Head module per head, each with its own
# query/key/value Linear, kept in an nn.ModuleList and concatenated; einsum scores; a causal switch.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Head(nn.Module):
    def __init__(self, d_model, head_size):
        super().__init__()
        self.query = nn.Linear(d_model, head_size, bias=False)
        self.key = nn.Linear(d_model, head_size, bias=False)
        self.value = nn.Linear(d_model, head_size, bias=False)

    def forward(self, x, causal=False):
        # x: (seq, d_model)
        q, k, v = self.query(x), self.key(x), self.value(x)
        wei = torch.einsum('id,jd->ij', q, k) / math.sqrt(k.shape[-1])    # (seq, seq)
        if causal:
            T = x.shape[0]
            allowed = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
            wei = wei.masked_fill(~allowed, float('-inf'))
        wei = F.softmax(wei, dim=-1)
        return torch.einsum('ij,jd->id', wei, v)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        head_size = d_model // n_heads
        self.heads = nn.ModuleList([Head(d_model, head_size) for _ in range(n_heads)])
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x, causal=False):
        return self.proj(torch.cat([h(x, causal) for h in self.heads], dim=-1))


def positional_encoding(seq_len, d_model):
    pe = torch.zeros(seq_len, d_model)
    for pos in range(seq_len):
        for i in range(0, d_model, 2):
            angle = pos / (10000 ** (i / d_model))
            pe[pos, i] = math.sin(angle)
            pe[pos, i + 1] = math.cos(angle)
    return pe


class TransformerBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, causal=False):
        super().__init__()
        self.causal = causal
        self.sa = MultiHeadAttention(d_model, n_heads)
        self.ln1 = nn.LayerNorm(d_model)
        self.ffwd = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
        self.ln2 = nn.LayerNorm(d_model)

    def forward(self, x, causal=None):
        causal = self.causal if causal is None else causal
        x = self.ln1(x + self.sa(x, causal))
        x = self.ln2(x + self.ffwd(x))
        return x
