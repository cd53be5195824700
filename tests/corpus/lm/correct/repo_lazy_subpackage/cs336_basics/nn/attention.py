import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from .layers import Linear


def softmax(x, dim):
    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))


def scaled_dot_product_attention(Q, K, V, mask=None):
    scale = Q.shape[-1] ** -0.5
    logits = torch.matmul(Q, K.transpose(-1, -2)) * scale
    if mask is not None:
        logits = logits.masked_fill(mask.logical_not(), float("-inf"))
    return torch.matmul(softmax(logits, dim=-1), V)


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, rope=None):
        super().__init__()
        self.num_heads = num_heads
        self.q_proj = Linear(d_model, d_model)
        self.k_proj = Linear(d_model, d_model)
        self.v_proj = Linear(d_model, d_model)
        self.output_proj = Linear(d_model, d_model)
        self.rope = rope

    def forward(self, x, token_positions=None):
        n = x.shape[-2]
        q = rearrange(self.q_proj(x), "... n (h d) -> ... h n d", h=self.num_heads)
        k = rearrange(self.k_proj(x), "... n (h d) -> ... h n d", h=self.num_heads)
        v = rearrange(self.v_proj(x), "... n (h d) -> ... h n d", h=self.num_heads)
        if self.rope is not None:
            pos = torch.arange(n, device=x.device) if token_positions is None else token_positions
            pos = rearrange(pos, "... n -> ... 1 n")
            q, k = self.rope(q, pos), self.rope(k, pos)
        allowed = torch.ones(n, n, dtype=torch.bool, device=x.device).tril_()
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        return self.output_proj(rearrange(out, "... h n d -> ... n (h d)"))
