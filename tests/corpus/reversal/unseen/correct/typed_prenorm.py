"""Digit-reversal seq2seq transformer (pre-norm variant), fully type-annotated."""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

PAD: int = 10
SOS: int = 11
EOS: int = 12
VOCAB: int = 13

NEG_INF: float = -1e9


def make_batch(batch_size: int, min_len: int = 4, max_len: int = 10,
               device: str | torch.device = 'cpu') -> Tuple[Tensor, Tensor]:
    lengths: Tensor = torch.randint(min_len, max_len + 1, (batch_size,))
    t_src: int = int(lengths.max().item())
    src: Tensor = torch.full((batch_size, t_src), PAD, dtype=torch.long)
    tgt: Tensor = torch.full((batch_size, t_src + 2), PAD, dtype=torch.long)
    for row in range(batch_size):
        n: int = int(lengths[row].item())
        body: Tensor = torch.randint(0, 10, (n,))
        src[row, :n] = body
        tgt[row, 0] = SOS
        tgt[row, 1:n + 1] = body.flip(0)
        tgt[row, n + 1] = EOS
    return src.to(device), tgt.to(device)


def padding_mask(x: Tensor, pad: int = PAD) -> Tensor:
    """(B, T) -> (B, 1, 1, T) boolean, True = real token."""
    return (x != pad).unsqueeze(1).unsqueeze(2)


def target_mask(x: Tensor, pad: int = PAD) -> Tensor:
    """(B, T) -> (B, 1, T, T) boolean: padding and no-peeking combined."""
    t: int = x.size(1)
    causal: Tensor = torch.tril(torch.ones((t, t), dtype=torch.bool, device=x.device))
    return padding_mask(x, pad) & causal.unsqueeze(0).unsqueeze(0)


class PositionalEncoding(nn.Module):
    pe: Tensor

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.1) -> None:
        super().__init__()
        self.dropout: nn.Dropout = nn.Dropout(dropout)
        pe: Tensor = torch.zeros(max_len, d_model)
        position: Tensor = torch.arange(0, max_len, dtype=torch.float32).unsqueeze(1)
        div: Tensor = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32)
                                * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div)
        pe[:, 1::2] = torch.cos(position * div)
        self.register_buffer('pe', pe.unsqueeze(0))

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(x + self.pe[:, : x.size(1)])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.1) -> None:
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.num_heads: int = num_heads
        self.d_head: int = d_model // num_heads
        self.wq: nn.Linear = nn.Linear(d_model, d_model)
        self.wk: nn.Linear = nn.Linear(d_model, d_model)
        self.wv: nn.Linear = nn.Linear(d_model, d_model)
        self.wo: nn.Linear = nn.Linear(d_model, d_model)
        self.dropout: nn.Dropout = nn.Dropout(dropout)

    def _shape(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.num_heads, self.d_head).transpose(1, 2)

    def forward(self, q: Tensor, k: Tensor, v: Tensor,
                mask: Optional[Tensor] = None) -> Tuple[Tensor, Optional[Tensor]]:
        b, t_q, d = q.shape
        qh: Tensor = self._shape(self.wq(q))
        kh: Tensor = self._shape(self.wk(k))
        vh: Tensor = self._shape(self.wv(v))
        scores: Tensor = torch.matmul(qh, kh.transpose(-2, -1)) / math.sqrt(self.d_head)
        if mask is not None:
            scores = scores.masked_fill(~mask, NEG_INF)
        probs: Tensor = torch.softmax(scores, dim=-1)
        context: Tensor = torch.matmul(self.dropout(probs), vh)
        context = context.transpose(1, 2).contiguous().view(b, t_q, d)
        return self.wo(context), probs


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.fc1: nn.Linear = nn.Linear(d_model, d_ff)
        self.fc2: nn.Linear = nn.Linear(d_ff, d_model)
        self.dropout: nn.Dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.dropout(F.relu(self.fc1(x))))


class EncoderLayer(nn.Module):
    """Pre-norm: x + Sublayer(LayerNorm(x))."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.norm_attn: nn.LayerNorm = nn.LayerNorm(d_model)
        self.norm_ff: nn.LayerNorm = nn.LayerNorm(d_model)
        self.attn: MultiHeadAttention = MultiHeadAttention(d_model, h, dropout)
        self.ff: FeedForward = FeedForward(d_model, d_ff, dropout)
        self.dropout: nn.Dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Optional[Tensor] = None) -> Tensor:
        y: Tensor = self.norm_attn(x)
        x = x + self.dropout(self.attn(y, y, y, mask)[0])
        x = x + self.dropout(self.ff(self.norm_ff(x)))
        return x


class DecoderLayer(nn.Module):
    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.norm_self: nn.LayerNorm = nn.LayerNorm(d_model)
        self.norm_cross: nn.LayerNorm = nn.LayerNorm(d_model)
        self.norm_ff: nn.LayerNorm = nn.LayerNorm(d_model)
        self.self_attn: MultiHeadAttention = MultiHeadAttention(d_model, h, dropout)
        self.cross_attn: MultiHeadAttention = MultiHeadAttention(d_model, h, dropout)
        self.ff: FeedForward = FeedForward(d_model, d_ff, dropout)
        self.dropout: nn.Dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, memory: Tensor, tgt_mask: Optional[Tensor] = None,
                src_mask: Optional[Tensor] = None) -> Tuple[Tensor, Optional[Tensor]]:
        y: Tensor = self.norm_self(x)
        x = x + self.dropout(self.self_attn(y, y, y, tgt_mask)[0])
        y = self.norm_cross(x)
        c, cross = self.cross_attn(y, memory, memory, src_mask)
        x = x + self.dropout(c)
        x = x + self.dropout(self.ff(self.norm_ff(x)))
        return x, cross


class MiniTransformer(nn.Module):
    def __init__(self, vocab: int = VOCAB, d_model: int = 64, h: int = 4, d_ff: int = 256,
                 num_layers: int = 2, dropout: float = 0.1, max_len: int = 64) -> None:
        super().__init__()
        self.d_model: int = d_model
        self.src_emb: nn.Embedding = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.tgt_emb: nn.Embedding = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.pos: PositionalEncoding = PositionalEncoding(d_model, max_len, dropout)
        self.encoder_layers: nn.ModuleList = nn.ModuleList(
            [EncoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.decoder_layers: nn.ModuleList = nn.ModuleList(
            [DecoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        # pre-norm stacks need a final norm before the output projection
        self.enc_norm: nn.LayerNorm = nn.LayerNorm(d_model)
        self.dec_norm: nn.LayerNorm = nn.LayerNorm(d_model)
        self.generator: nn.Linear = nn.Linear(d_model, vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src: Tensor, src_mask: Optional[Tensor]) -> Tensor:
        x: Tensor = self.pos(self.src_emb(src) * math.sqrt(self.d_model))
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return self.enc_norm(x)

    def decode(self, tgt: Tensor, memory: Tensor, tgt_mask: Optional[Tensor],
               src_mask: Optional[Tensor]) -> Tuple[Tensor, List[Optional[Tensor]]]:
        x: Tensor = self.pos(self.tgt_emb(tgt) * math.sqrt(self.d_model))
        maps: List[Optional[Tensor]] = []
        for layer in self.decoder_layers:
            x, cross = layer(x, memory, tgt_mask, src_mask)
            maps.append(cross)
        return self.dec_norm(x), maps

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tuple[Tensor, List[Optional[Tensor]]]:
        src_mask: Tensor = padding_mask(src)
        memory: Tensor = self.encode(src, src_mask)
        x, maps = self.decode(tgt_in, memory, target_mask(tgt_in), src_mask)
        return self.generator(x), maps


def train(model: MiniTransformer, steps: int = 3000, batch_size: int = 64, lr: float = 1e-3,
          device: str | torch.device = 'cpu', warmup: int = 400,
          log_every: int = 200) -> MiniTransformer:
    model.to(device)
    model.train()
    optim: torch.optim.Optimizer = torch.optim.Adam(model.parameters(), lr=lr,
                                                    betas=(0.9, 0.98), eps=1e-9)
    schedule = torch.optim.lr_scheduler.LambdaLR(optim, lambda s: min((s + 1) / warmup, 1.0))
    for step in range(1, steps + 1):
        src, tgt = make_batch(batch_size, device=device)
        tgt_in: Tensor = tgt[:, :-1]
        tgt_out: Tensor = tgt[:, 1:]
        logits, _ = model(src, tgt_in)
        loss: Tensor = F.cross_entropy(logits.reshape(-1, logits.size(-1)),
                                       tgt_out.reshape(-1), ignore_index=PAD)
        optim.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm: Tensor = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        schedule.step()
        if step == 1 or step % log_every == 0:
            print(f"step {step:5d}  loss {loss.item():.4f}  grad_norm {float(grad_norm):.2f}")
    return model


@torch.no_grad()
def greedy_decode(model: MiniTransformer, src: Tensor,
                  max_len: int = 20) -> Tuple[Tensor, List[Optional[Tensor]]]:
    model.eval()
    src_mask: Tensor = padding_mask(src)
    memory: Tensor = model.encode(src, src_mask)
    ys: Tensor = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)
    maps: List[Optional[Tensor]] = []
    for _ in range(max_len - 1):
        out, maps = model.decode(ys, memory, target_mask(ys), src_mask)
        next_tok: Tensor = model.generator(out[:, -1]).argmax(dim=-1, keepdim=True)
        ys = torch.cat([ys, next_tok], dim=1)
        if bool((next_tok == EOS).all()):
            break
    return ys, maps
