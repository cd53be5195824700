#!/usr/bin/env python
"""
Assignment 4 -- Mini Transformer (sequence reversal)

Training notes:
  - gradient accumulation: each optimizer step averages 2 micro-batches of batch_size // 2
  - schedule: SequentialLR(LinearLR warmup -> CosineAnnealingLR)
  - clip_grad_value_ instead of clip_grad_norm_
"""
from dataclasses import dataclass
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD: int = 10
SOS: int = 11
EOS: int = 12
VOCAB: int = 13
ACCUM: int = 2


@dataclass
class Config:
    d_model: int = 64
    h: int = 4
    d_ff: int = 256
    num_layers: int = 2
    dropout: float = 0.1


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    lens = torch.randint(min_len, max_len + 1, (batch_size,))
    T = int(lens.max())
    src = torch.full((batch_size, T), PAD, dtype=torch.long)
    tgt = torch.full((batch_size, T + 2), PAD, dtype=torch.long)
    for i, L in enumerate(lens.tolist()):
        s = torch.randint(0, 10, (L,))
        src[i, :L] = s
        tgt[i, 0] = SOS
        tgt[i, 1:L + 1] = s.flip(0)
        tgt[i, L + 1] = EOS
    return src.to(device), tgt.to(device)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        k = torch.arange(0, d_model, 2).float()
        pos = torch.arange(max_len).float().unsqueeze(1)
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(pos / 10000 ** (k / d_model))
        pe[:, 1::2] = torch.cos(pos / 10000 ** (k / d_model))
        self.register_buffer('pe', pe.unsqueeze(0), persistent=False)

    def forward(self, x):
        return self.dropout(x + self.pe[:, :x.size(1)])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.h = num_heads
        self.scale = (d_model // num_heads) ** -0.5
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, q, k, v, mask=None):
        B, Tq, C = q.shape
        Tk = k.size(1)
        q = self.query(q).reshape(B, Tq, self.h, C // self.h).transpose(1, 2)
        k = self.key(k).reshape(B, Tk, self.h, C // self.h).transpose(1, 2)
        v = self.value(v).reshape(B, Tk, self.h, C // self.h).transpose(1, 2)
        w = (q * self.scale) @ k.transpose(-2, -1)
        if mask is not None:
            w = w.masked_fill(~mask, float(-1e9))
        w = w.softmax(dim=-1)
        y = (self.drop(w) @ v).transpose(1, 2).reshape(B, Tq, C)
        return self.proj(y), w


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Dropout(dropout), nn.Linear(d_ff, d_model))

    def forward(self, x):
        return self.net(x)


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_attention = MultiHeadAttention(d_model, h, dropout)
        self.position_wise = FeedForward(d_model, d_ff, dropout)
        self.ln_attn = nn.LayerNorm(d_model)
        self.ln_ff = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        h, _ = self.self_attention(x, x, x, mask=mask)
        x = self.ln_attn(x + self.dropout(h))
        x = self.ln_ff(x + self.dropout(self.position_wise(x)))
        return x


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_attention = MultiHeadAttention(d_model, h, dropout)
        self.encdec_attention = MultiHeadAttention(d_model, h, dropout)
        self.position_wise = FeedForward(d_model, d_ff, dropout)
        self.ln_self = nn.LayerNorm(d_model)
        self.ln_cross = nn.LayerNorm(d_model)
        self.ln_ff = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        h, _ = self.self_attention(x, x, x, mask=tgt_mask)
        x = self.ln_self(x + self.dropout(h))
        h, cross = self.encdec_attention(x, memory, memory, mask=src_mask)
        x = self.ln_cross(x + self.dropout(h))
        x = self.ln_ff(x + self.dropout(self.position_wise(x)))
        return x, cross


def padding_mask(x, pad=PAD):
    return (x != pad).unsqueeze(1).unsqueeze(2)


def target_mask(x, pad=PAD):
    T = x.size(1)
    return padding_mask(x, pad) & torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))


class MiniTransformer(nn.Module):
    def __init__(self, vocab=13, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        super().__init__()
        self.cfg = Config(d_model, h, d_ff, num_layers, dropout)
        self.src_emb = nn.Embedding(vocab, d_model)
        self.tgt_emb = nn.Embedding(vocab, d_model)
        self.pos = PositionalEncoding(d_model, max_len, dropout)
        self.encoder = nn.ModuleList([EncoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.decoder = nn.ModuleList([DecoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.generator = nn.Linear(d_model, vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src, src_mask):
        x = self.pos(self.src_emb(src) * math.sqrt(self.cfg.d_model))
        for layer in self.encoder:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, tgt_mask, src_mask):
        x = self.pos(self.tgt_emb(tgt) * math.sqrt(self.cfg.d_model))
        maps = []
        for layer in self.decoder:
            x, c = layer(x, memory, tgt_mask, src_mask)
            maps.append(c)
        return x, maps

    def forward(self, src, tgt_in):
        src_mask = padding_mask(src)
        memory = self.encode(src, src_mask)
        x, maps = self.decode(tgt_in, memory, target_mask(tgt_in), src_mask)
        return self.generator(x), maps


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    warm = max(1, min(warmup, steps - 1))
    sched = torch.optim.lr_scheduler.SequentialLR(
        opt,
        schedulers=[torch.optim.lr_scheduler.LinearLR(opt, start_factor=1 / warm, total_iters=warm),
                    torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, steps - warm), eta_min=lr / 10)],
        milestones=[warm])
    micro = max(1, batch_size // ACCUM)
    for step in range(steps):
        opt.zero_grad()
        total = 0.0
        for _ in range(ACCUM):
            src, tgt = make_batch(micro, device=device)
            logits, _ = model(src, tgt[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1), label_smoothing=0.1) / ACCUM
            loss.backward()
            total += loss.item()
        torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)
        opt.step()
        sched.step()
        if step % log_every == 0:
            print(f"step {step}  loss {total:.4f}  lr {sched.get_last_lr()[0]:.2e}")
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    src_mask = padding_mask(src)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)
    for _ in range(max_len - 1):
        x, maps = model.decode(ys, memory, target_mask(ys), src_mask)
        nxt = model.generator(x[:, -1]).argmax(-1, keepdim=True)
        ys = torch.cat([ys, nxt], 1)
        if (nxt == EOS).all():
            break
    return ys, maps


if __name__ == '__main__':
    model = train(MiniTransformer())
    torch.save(model.state_dict(), 'reversal.pt')
