"""Transformer block on top of nn.MultiheadAttention.

The lesson's attention works on unbatched (seq, d_model) input; nn.MultiheadAttention
accepts that too (unbatched input is (L, E)). causal=True in the constructor makes the
block pass a boolean attn_mask (True = not allowed) built with triu(diagonal=1).
"""
import math
import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.mha = nn.MultiheadAttention(d_model, n_heads)

    def forward(self, x, causal=False):
        mask = None
        if causal:
            T = x.size(0)
            mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=-1)
        out, _ = self.mha(x, x, x, attn_mask=mask, need_weights=False)
        return out


def positional_encoding(seq_len, d_model):
    pe = torch.zeros(seq_len, d_model)
    for pos in range(seq_len):
        for i in range(0, d_model, 2):
            pe[pos, i] = math.sin(pos / 10000 ** (i / d_model))
            pe[pos, i + 1] = math.cos(pos / 10000 ** (i / d_model))
    return pe


class TransformerBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, causal=False):
        super().__init__()
        self.causal = causal
        self.attention = MultiHeadAttention(d_model, n_heads)
        self.norm_1 = nn.LayerNorm(d_model)
        self.feed_forward = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
        self.norm_2 = nn.LayerNorm(d_model)

    def forward(self, x):
        x = self.norm_1(x + self.attention(x, causal=self.causal))
        return self.norm_2(x + self.feed_forward(x))
