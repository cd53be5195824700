# Self-attention + block (lesson 01) using F.scaled_dot_product_attention.
# The block accepts (seq, d_model) like the lesson; internally I add a batch
# axis of 1 so the same code would work batched. causal is a constructor
# keyword and can be overridden per call.
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, causal=False):
        super().__init__()
        self.n_heads = n_heads
        self.causal = causal
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, d_model)
        self.o = nn.Linear(d_model, d_model)

    def forward(self, x, causal=None):
        causal = self.causal if causal is None else causal
        squeeze = x.dim() == 2
        if squeeze:
            x = x.unsqueeze(0)                                  # (1, T, D)
        B, T, D = x.shape
        split = lambda t: t.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(split(self.q(x)), split(self.k(x)), split(self.v(x)),
                                           is_causal=causal)
        y = self.o(y.transpose(1, 2).reshape(B, T, D))
        return y.squeeze(0) if squeeze else y


def positional_encoding(seq_len, d_model):
    position = torch.arange(seq_len).unsqueeze(1).float()
    div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe = torch.zeros(seq_len, d_model)
    pe[:, 0::2] = torch.sin(position * div)
    pe[:, 1::2] = torch.cos(position * div)
    return pe


class TransformerBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, causal=False):
        super().__init__()
        self.causal = causal
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, x, causal=None):
        causal = self.causal if causal is None else causal
        x = self.norm1(x + self.attn(x, causal=causal))
        x = self.norm2(x + self.ff(x))
        return x
