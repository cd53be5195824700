# Digit reversal with a small encoder-decoder transformer.
import functools
import logging
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, SOS, EOS = 10, 11, 12
VOCAB = 13


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    lengths = torch.randint(min_len, max_len + 1, (batch_size,)).tolist()
    width = max(lengths)
    src = torch.full((batch_size, width), PAD, dtype=torch.long)
    tgt = torch.full((batch_size, width + 2), PAD, dtype=torch.long)
    for row, n in enumerate(lengths):
        digits = torch.randint(0, 10, (n,))
        src[row, :n] = digits
        tgt[row, 0] = SOS
        tgt[row, 1:n + 1] = torch.flip(digits, dims=[0])
        tgt[row, n + 1] = EOS
    return src.to(device), tgt.to(device)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        position = torch.arange(max_len, dtype=torch.float32)[:, None]
        freq = torch.pow(10000.0, -torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
        table = torch.zeros(max_len, d_model)
        table[:, 0::2] = torch.sin(position * freq)
        table[:, 1::2] = torch.cos(position * freq)
        self.register_buffer("table", table)

    def forward(self, x):
        return self.drop(x + self.table[: x.shape[1]])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.h, self.dk = num_heads, d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)

    def heads(self, t):
        b, n, _ = t.shape
        return t.reshape(b, n, self.h, self.dk).permute(0, 2, 1, 3)

    def forward(self, q, k, v, mask=None):
        b, nq, d = q.shape
        qh, kh, vh = self.heads(self.q_proj(q)), self.heads(self.k_proj(k)), self.heads(self.v_proj(v))
        logits = torch.einsum("bhqd,bhkd->bhqk", qh, kh) / math.sqrt(self.dk)
        if mask is not None:
            logits = logits.masked_fill(mask == 0, -1e9)
        weights = logits.softmax(dim=-1)
        mixed = torch.einsum("bhqk,bhkd->bhqd", self.drop(weights), vh)
        mixed = mixed.permute(0, 2, 1, 3).reshape(b, nq, d)
        return self.out_proj(mixed), weights


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.up = nn.Linear(d_model, d_ff)
        self.down = nn.Linear(d_ff, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.down(self.drop(F.gelu(self.up(x))))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm_a = nn.LayerNorm(d_model)
        self.norm_b = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        x = self.norm_a(x + self.drop(self.attn(x, x, x, mask)[0]))
        return self.norm_b(x + self.drop(self.ff(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.cross_attn = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norms = nn.ModuleList([nn.LayerNorm(d_model) for _ in range(3)])
        self.drop = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        x = self.norms[0](x + self.drop(self.self_attn(x, x, x, tgt_mask)[0]))
        attended, cross = self.cross_attn(x, memory, memory, src_mask)
        x = self.norms[1](x + self.drop(attended))
        return self.norms[2](x + self.drop(self.ff(x))), cross


def padding_mask(x, pad=PAD):
    return (x != pad)[:, None, None, :]


def target_mask(x, pad=PAD):
    n = x.shape[1]
    future = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
    return padding_mask(x, pad) & future[None, None]


class MiniTransformer(nn.Module):
    def __init__(self, vocab=VOCAB, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        super().__init__()
        self.d_model = d_model
        self.src_emb = nn.Embedding(vocab, d_model)
        self.tgt_emb = nn.Embedding(vocab, d_model)
        self.pos = PositionalEncoding(d_model, max_len, dropout)
        self.enc = nn.ModuleList([EncoderLayer(d_model, h, d_ff, dropout)] * num_layers)
        self.dec = nn.ModuleList([DecoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.generator = nn.Linear(d_model, vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src, src_mask):
        x = self.pos(self.src_emb(src) * math.sqrt(self.d_model))
        for layer in self.enc:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, tgt_mask, src_mask):
        x = self.pos(self.tgt_emb(tgt) * math.sqrt(self.d_model))
        cross = None
        for layer in self.dec:
            x, cross = layer(x, memory, tgt_mask, src_mask)
        return x, cross

    def forward(self, src, tgt):
        src_mask = padding_mask(src)
        memory = self.encode(src, src_mask)
        out, cross = self.decode(tgt, memory, target_mask(tgt), src_mask)
        return self.generator(out), cross


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / warmup, 1.0))
    for step in range(1, steps + 1):
        src, tgt = make_batch(batch_size, device=device)
        logits, _ = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
    return model



@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    src_mask = padding_mask(src)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.shape[0], 1), SOS, dtype=torch.long, device=src.device)
    cross = None
    for _ in range(max_len - 1):
        out, cross = model.decode(ys, memory, target_mask(ys), src_mask)
        nxt = model.generator(out[:, -1]).argmax(-1, keepdim=True)
        ys = torch.cat([ys, nxt], dim=1)
        if (nxt == EOS).all():
            break
    return ys, cross
