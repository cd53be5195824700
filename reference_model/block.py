"""Self-attention and a transformer block, from "Transformers & Attention from Scratch".

MultiHeadAttention works on unbatched (seq, d_model) input with one fused qkv
projection. TransformerBlock is post-norm and carries the lesson's exercise
done: a boolean causal flag (constructor keyword, overridable per call) that
sets the scores above the diagonal to -inf before the softmax. -inf is correct
here: with the diagonal kept, no row is ever fully masked.
"""
import math

import torch
import torch.nn.functional as F


class MultiHeadAttention(torch.nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.qkv = torch.nn.Linear(d_model, 3 * d_model)
        self.out_proj = torch.nn.Linear(d_model, d_model)

    def forward(self, x, causal=False):
        seq_len, d_model = x.shape
        qkv = self.qkv(x)                                       # (seq, 3*d_model)
        q, k, v = qkv.chunk(3, dim=-1)                          # each (seq, d_model)
        q = q.view(seq_len, self.n_heads, self.d_head).transpose(0, 1)   # (heads, seq, d_head)
        k = k.view(seq_len, self.n_heads, self.d_head).transpose(0, 1)
        v = v.view(seq_len, self.n_heads, self.d_head).transpose(0, 1)

        scores = q @ k.transpose(-2, -1) / (self.d_head ** 0.5)  # (heads, seq, seq)
        if causal:
            # position i may attend to j <= i only: blank out the strict upper triangle
            future = torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool,
                                           device=x.device), diagonal=1)  # (seq, seq)
            scores = scores.masked_fill(future, float('-inf'))
        weights = F.softmax(scores, dim=-1)                     # each row sums to 1
        out = weights @ v                                       # (heads, seq, d_head)
        out = out.transpose(0, 1).reshape(seq_len, d_model)     # back to (seq, d_model)
        return self.out_proj(out)


def positional_encoding(seq_len, d_model):
    pe = torch.zeros(seq_len, d_model)                          # (seq, d)
    position = torch.arange(seq_len).unsqueeze(1).float()      # (seq, 1)
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


class TransformerBlock(torch.nn.Module):
    def __init__(self, d_model, n_heads, d_ff, causal=False):
        super().__init__()
        self.causal = causal
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.norm1 = torch.nn.LayerNorm(d_model)
        self.ff = torch.nn.Sequential(
            torch.nn.Linear(d_model, d_ff), torch.nn.ReLU(), torch.nn.Linear(d_ff, d_model)
        )
        self.norm2 = torch.nn.LayerNorm(d_model)

    def forward(self, x, causal=None):
        causal = self.causal if causal is None else causal
        x = self.norm1(x + self.attn(x, causal=causal))   # residual connection + attention
        x = self.norm2(x + self.ff(x))                     # residual connection + feed-forward
        return x                                           # (seq, d_model)
