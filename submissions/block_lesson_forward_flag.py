# Transformers & Attention from Scratch -- my version of the module's code.
# Exercise: the causal flag is an argument of forward(), so the same block
# can run with or without the mask: block(x, causal=True).
import math
import torch
import torch.nn.functional as F

torch.manual_seed(42)
seq_len, d_model = 5, 8
x = torch.randn(seq_len, d_model)     # 5 tokens, 8-dim embeddings each

# self-attention by hand
W_q = torch.randn(d_model, d_model) * 0.1
W_k = torch.randn(d_model, d_model) * 0.1
W_v = torch.randn(d_model, d_model) * 0.1
Q = x @ W_q
K = x @ W_k
V = x @ W_v
scores = Q @ K.T / (d_model ** 0.5)      # (5, 5)
weights = F.softmax(scores, dim=-1)      # each row sums to 1
output = weights @ V                     # (5, 8)
print(weights.round(decimals=2))
print(weights.sum(dim=-1))               # all ones

# the same by hand, causal: keep the lower triangle (j <= i)
mask = torch.tril(torch.ones(seq_len, seq_len))
causal_weights = F.softmax(scores.masked_fill(mask == 0, float('-inf')), dim=-1)
print(causal_weights.round(decimals=2))


class MultiHeadAttention(torch.nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.qkv = torch.nn.Linear(d_model, 3 * d_model)
        self.out_proj = torch.nn.Linear(d_model, d_model)

    def forward(self, x, causal=False, return_weights=False):
        seq_len, d_model = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)                  # each (seq, d_model)
        q = q.view(seq_len, self.n_heads, self.d_head).transpose(0, 1)   # (heads, seq, d_head)
        k = k.view(seq_len, self.n_heads, self.d_head).transpose(0, 1)
        v = v.view(seq_len, self.n_heads, self.d_head).transpose(0, 1)

        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)   # (heads, seq, seq)
        if causal:
            mask = torch.tril(torch.ones(seq_len, seq_len, device=x.device))   # 1 = allowed
            scores = scores.masked_fill(mask == 0, float('-inf'))
        weights = F.softmax(scores, dim=-1)
        out = (weights @ v).transpose(0, 1).reshape(seq_len, d_model)
        out = self.out_proj(out)
        if return_weights:
            return out, weights
        return out

mha = MultiHeadAttention(d_model=8, n_heads=2)
print(mha(x).shape)   # torch.Size([5, 8])


def positional_encoding(seq_len, d_model):
    pe = torch.zeros(seq_len, d_model)
    position = torch.arange(seq_len).unsqueeze(1).float()
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe

pe = positional_encoding(seq_len, d_model)
x_with_pos = x + pe


class TransformerBlock(torch.nn.Module):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.norm1 = torch.nn.LayerNorm(d_model)
        self.ff = torch.nn.Sequential(
            torch.nn.Linear(d_model, d_ff), torch.nn.ReLU(), torch.nn.Linear(d_ff, d_model)
        )
        self.norm2 = torch.nn.LayerNorm(d_model)

    def forward(self, x, causal=False):
        x = self.norm1(x + self.attn(x, causal=causal))   # residual connection + attention
        x = self.norm2(x + self.ff(x))                     # residual connection + feed-forward
        return x

block = TransformerBlock(d_model=8, n_heads=2, d_ff=32)
print(block(x_with_pos).shape)                 # torch.Size([5, 8])
print(block(x_with_pos, causal=True).shape)    # torch.Size([5, 8])

# exercise check: the causal weights have an all-zero upper triangle
_, w = block.attn(x_with_pos, causal=True, return_weights=True)
print(w.round(decimals=2))
print("upper triangle all zero:", bool((torch.triu(w, diagonal=1) == 0).all()))
