"""Building blocks in plain torch: fused qkv projection, RoPE from cached cos/sin tables,
attention through F.scaled_dot_product_attention."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Linear(nn.Module):
    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device, dtype=dtype))
        std = (2 / (in_features + out_features)) ** 0.5
        nn.init.trunc_normal_(self.weight, 0.0, std, -3 * std, 3 * std)

    def forward(self, x):
        return x @ self.weight.T


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, 0.0, 1.0, -3.0, 3.0)

    def forward(self, token_ids):
        return self.weight[token_ids]


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.square().mean(-1, keepdim=True) + self.eps)
        return (x * self.weight).to(dtype)


class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff, device=None, dtype=None):
        super().__init__()
        self.w1 = Linear(d_model, d_ff, device, dtype)
        self.w2 = Linear(d_ff, d_model, device, dtype)
        self.w3 = Linear(d_model, d_ff, device, dtype)

    def forward(self, x):
        a = self.w1(x)
        return self.w2(a * torch.sigmoid(a) * self.w3(x))


class RoPE(nn.Module):
    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__()
        freqs = 1.0 / (theta ** (torch.arange(0, d_k, 2, device=device, dtype=torch.float32) / d_k))
        t = torch.arange(max_seq_len, device=device, dtype=torch.float32)
        ang = t[:, None] * freqs[None, :]  # (max_seq_len, d_k/2)
        self.register_buffer("cos_cached", ang.cos(), persistent=False)
        self.register_buffer("sin_cached", ang.sin(), persistent=False)

    def forward(self, x, token_positions):
        cos = self.cos_cached[token_positions]  # (..., seq, d_k/2)
        sin = self.sin_cached[token_positions]
        x_even, x_odd = x[..., 0::2], x[..., 1::2]
        out = torch.stack((x_even * cos - x_odd * sin, x_even * sin + x_odd * cos), dim=-1)
        return out.flatten(-2)


class CausalSelfAttention(nn.Module):
    """One (3*d_model, d_model) matrix projects q, k and v together."""

    def __init__(self, d_model, num_heads, rope=None, device=None, dtype=None):
        super().__init__()
        assert d_model % num_heads == 0
        self.n_head, self.d_model = num_heads, d_model
        self.qkv_proj = Linear(d_model, 3 * d_model, device, dtype)
        self.output_proj = Linear(d_model, d_model, device, dtype)
        self.rope = rope

    def forward(self, x, token_positions=None):
        B = x.shape[:-2]
        T = x.shape[-2]
        q, k, v = self.qkv_proj(x).split(self.d_model, dim=-1)
        q = q.view(*B, T, self.n_head, -1).transpose(-3, -2)  # (..., h, T, hd)
        k = k.view(*B, T, self.n_head, -1).transpose(-3, -2)
        v = v.view(*B, T, self.n_head, -1).transpose(-3, -2)
        if self.rope is not None:
            if token_positions is None:
                token_positions = torch.arange(T, device=x.device)
            token_positions = token_positions[..., None, :]  # broadcast over heads
            q = self.rope(q, token_positions)
            k = self.rope(k, token_positions)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(-3, -2).reshape(*B, T, self.d_model)
        return self.output_proj(y)
