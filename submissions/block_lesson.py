# 01 - Transformers & Attention from Scratch
# The module's code top to bottom, with the exercise done: TransformerBlock
# takes a boolean `causal` flag in its constructor and passes it on to its
# attention, which then masks scores above the diagonal with -inf before the
# softmax.

import torch
import torch.nn.functional as F

# ---- Self-attention from scratch -------------------------------------------
torch.manual_seed(42)
seq_len, d_model = 5, 8
x = torch.randn(seq_len, d_model)     # 5 tokens, 8-dim embeddings each

W_q = torch.randn(d_model, d_model) * 0.1
W_k = torch.randn(d_model, d_model) * 0.1
W_v = torch.randn(d_model, d_model) * 0.1

Q = x @ W_q     # (5, 8) -- "what am I looking for"
K = x @ W_k     # (5, 8) -- "what do I offer"
V = x @ W_v     # (5, 8) -- "what do I actually contribute if attended to"

scores = Q @ K.T / (d_model ** 0.5)      # (5, 5) -- raw attention scores
weights = F.softmax(scores, dim=-1)      # (5, 5) -- each row sums to 1
output = weights @ V                      # (5, 8) -- weighted blend of all tokens' V

print(weights.round(decimals=2))


# ---- Multi-head attention ----------------------------------------------------
class MultiHeadAttention(torch.nn.Module):
    def __init__(self, d_model, n_heads, causal=False):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.causal = causal
        self.qkv = torch.nn.Linear(d_model, 3 * d_model)
        self.out_proj = torch.nn.Linear(d_model, d_model)
        self.last_weights = None       # kept so the exercise can print them

    def forward(self, x):
        seq_len, d_model = x.shape
        qkv = self.qkv(x)                                       # (seq, 3*d_model)
        q, k, v = qkv.chunk(3, dim=-1)                           # each (seq, d_model)
        q = q.view(seq_len, self.n_heads, self.d_head).transpose(0, 1)   # (heads, seq, d_head)
        k = k.view(seq_len, self.n_heads, self.d_head).transpose(0, 1)
        v = v.view(seq_len, self.n_heads, self.d_head).transpose(0, 1)

        scores = q @ k.transpose(-2, -1) / (self.d_head ** 0.5)  # (heads, seq, seq)
        if self.causal:
            # exercise: position i may only attend to positions j <= i
            future = torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool), diagonal=1)
            scores = scores.masked_fill(future, float('-inf'))
        weights = F.softmax(scores, dim=-1)
        self.last_weights = weights.detach()
        out = weights @ v                                        # (heads, seq, d_head)
        out = out.transpose(0, 1).reshape(seq_len, d_model)       # back to (seq, d_model)
        return self.out_proj(out)

mha = MultiHeadAttention(d_model=8, n_heads=2)
print(mha(x).shape)   # torch.Size([5, 8])


# ---- Positional encoding -------------------------------------------------------
import math

def positional_encoding(seq_len, d_model):
    pe = torch.zeros(seq_len, d_model)
    position = torch.arange(seq_len).unsqueeze(1).float()
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe

pe = positional_encoding(seq_len, d_model)
x_with_pos = x + pe    # elementwise add -- now position is baked into the representation


# ---- A minimal transformer block --------------------------------------------------
class TransformerBlock(torch.nn.Module):
    def __init__(self, d_model, n_heads, d_ff, causal=False):
        super().__init__()
        self.causal = causal
        self.attn = MultiHeadAttention(d_model, n_heads, causal=causal)
        self.norm1 = torch.nn.LayerNorm(d_model)
        self.ff = torch.nn.Sequential(
            torch.nn.Linear(d_model, d_ff), torch.nn.ReLU(), torch.nn.Linear(d_ff, d_model)
        )
        self.norm2 = torch.nn.LayerNorm(d_model)

    def forward(self, x):
        x = self.norm1(x + self.attn(x))    # residual connection + attention
        x = self.norm2(x + self.ff(x))      # residual connection + feed-forward
        return x

block = TransformerBlock(d_model=8, n_heads=2, d_ff=32)
print(block(x_with_pos).shape)   # torch.Size([5, 8])


# ---- Exercise: a causal block ----------------------------------------------------
causal_block = TransformerBlock(d_model=8, n_heads=2, d_ff=32, causal=True)
out = causal_block(x_with_pos)
print(out.shape)                                      # torch.Size([5, 8])
print(causal_block.attn.last_weights.round(decimals=2))   # upper triangle is exactly 0
print(torch.triu(causal_block.attn.last_weights, diagonal=1).abs().max())   # tensor(0.)
