"""Lesson 01's block written the way the d2l book writes attention: masked_softmax over valid lengths (the
causal case is a valid length per query: query i sees keys 0..i), DotProductAttention with bmm, heads folded
into the batch by transpose_qkv / transpose_output, and AddNorm (residual, then LayerNorm: post-norm, as the
lesson's block). The contract's (seq, d_model) input gets a batch axis of one inside the block."""
import math

import torch
from torch import nn


def masked_softmax(X, valid_lens):
    """Softmax over the last axis; keys at or past a row's valid length get a very negative score first."""
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    shape = X.shape
    lens = torch.repeat_interleave(valid_lens, shape[1]) if valid_lens.dim() == 1 else valid_lens.reshape(-1)
    flat = X.reshape(-1, shape[-1])
    keep = torch.arange(shape[-1], device=X.device)[None, :] < lens[:, None]
    flat = flat.masked_fill(~keep, -1e6)
    return nn.functional.softmax(flat.reshape(shape), dim=-1)


class DotProductAttention(nn.Module):
    def __init__(self, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        d = queries.shape[-1]
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)


def transpose_qkv(X, num_heads):
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1).permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def transpose_output(X, num_heads):
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2]).permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=False):
        super().__init__()
        self.num_heads = n_heads
        self.attention = DotProductAttention(dropout)
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, causal=False):
        unbatched = x.dim() == 2
        X = x[None] if unbatched else x                          # (batch, seq, d_model)
        batch, steps = X.shape[0], X.shape[1]
        valid_lens = None
        if causal:
            valid_lens = torch.arange(0, steps, device=X.device).repeat(batch, 1)      # (batch, seq)
            valid_lens = torch.repeat_interleave(valid_lens, repeats=self.num_heads, dim=0)
        q = transpose_qkv(self.W_q(X), self.num_heads)
        k = transpose_qkv(self.W_k(X), self.num_heads)
        v = transpose_qkv(self.W_v(X), self.num_heads)
        out = self.W_o(transpose_output(self.attention(q, k, v, valid_lens), self.num_heads))
        return out[0] if unbatched else out


def positional_encoding(seq_len, d_model):
    P = torch.zeros((seq_len, d_model))
    X = torch.arange(seq_len, dtype=torch.float32).reshape(-1, 1) / torch.pow(
        10000, torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    P[:, 0::2] = torch.sin(X)
    P[:, 1::2] = torch.cos(X)
    return P


class AddNorm(nn.Module):
    def __init__(self, norm_shape, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.ln = nn.LayerNorm(norm_shape)

    def forward(self, X, Y):
        return self.ln(self.dropout(Y) + X)


class PositionWiseFFN(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.dense1 = nn.Linear(d_model, d_ff)
        self.relu = nn.ReLU()
        self.dense2 = nn.Linear(d_ff, d_model)

    def forward(self, X):
        return self.dense2(self.relu(self.dense1(X)))


class TransformerBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, causal=False):
        super().__init__()
        self.causal = causal
        self.attention = MultiHeadAttention(d_model, n_heads)
        self.addnorm1 = AddNorm(d_model)
        self.ffn = PositionWiseFFN(d_model, d_ff)
        self.addnorm2 = AddNorm(d_model)

    def forward(self, X, causal=None):
        causal = self.causal if causal is None else causal
        Y = self.addnorm1(X, self.attention(X, causal=causal))
        return self.addnorm2(Y, self.ffn(Y))
