import torch
from torch import nn


class RoPE(nn.Module):
    """Angles computed on the fly for the positions asked for (no table, no length limit)."""

    def __init__(self, theta: float, d_k: int, max_seq_len: int | None = None):
        super().__init__()
        self.register_buffer("inv_freq", theta ** -(torch.arange(0, d_k, 2, dtype=torch.float64) / d_k),
                             persistent=False)

    def forward(self, x, token_positions):
        ang = token_positions.to(torch.float64)[..., None] * self.inv_freq  # (..., seq, d/2)
        cos = ang.cos().to(x.dtype).repeat_interleave(2, -1)  # (..., seq, d)
        sin = ang.sin().to(x.dtype).repeat_interleave(2, -1)
        # (x0, x1) -> (-x1, x0) for every pair: flip inside the pair, negate the first
        swapped = x.unflatten(-1, (-1, 2)).flip(-1) * torch.tensor([-1.0, 1.0], dtype=x.dtype)
        return x * cos + swapped.flatten(-2) * sin
