# Lesson 01 exercise: self-attention + transformer block with a causal flag.
# My version: pre-norm block, attention through einsum, causal passed per call
# (block(x, causal=True)); the mask is built with torch.ones(...).tril().
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.h = n_heads
        self.dh = d_model // n_heads
        self.Wqkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.Wo = nn.Linear(d_model, d_model)

    def forward(self, x, causal=False):
        T, D = x.shape
        q, k, v = self.Wqkv(x).split(D, dim=-1)
        q = q.view(T, self.h, self.dh)
        k = k.view(T, self.h, self.dh)
        v = v.view(T, self.h, self.dh)
        s = torch.einsum('ihd,jhd->hij', q, k) / math.sqrt(self.dh)     # (h, T, T)
        if causal:
            keep = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            s = s.masked_fill(~keep, float('-inf'))
        a = s.softmax(dim=-1)
        out = torch.einsum('hij,jhd->ihd', a, v).reshape(T, D)
        return self.Wo(out)


def positional_encoding(seq_len, d_model):
    pos = torch.arange(seq_len, dtype=torch.float32).unsqueeze(1)
    i = torch.arange(0, d_model, 2, dtype=torch.float32)
    angle = pos / torch.pow(10000.0, i / d_model)
    pe = torch.empty(seq_len, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe


class TransformerBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def forward(self, x, causal=False):
        x = x + self.attn(self.ln1(x), causal=causal)
        x = x + self.mlp(self.ln2(x))
        return x


if __name__ == '__main__':
    x = torch.randn(6, 16) + positional_encoding(6, 16)
    blk = TransformerBlock(16, 4, 64)
    print(blk(x, causal=True).shape)
