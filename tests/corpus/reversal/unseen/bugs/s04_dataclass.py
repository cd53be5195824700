# reversal task -- config-driven version (see Config / TrainConfig below)
from dataclasses import dataclass, field
import math
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, SOS, EOS = 10, 11, 12
VOCAB = 13


@dataclass
class Config:
    vocab: int = VOCAB
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 256
    n_layers: int = 2
    dropout: float = 0.1
    max_len: int = 64

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


@dataclass
class TrainConfig:
    steps: int = 3000
    batch_size: int = 64
    lr: float = 1e-3
    warmup: int = 400
    clip: float = 1.0
    betas: tuple = field(default=(0.9, 0.98))
    log_every: int = 200


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    seqs = []
    for _ in range(batch_size):
        n = random.randint(min_len, max_len)
        seqs.append([random.randrange(10) for _ in range(n)])
    longest = max(len(s) for s in seqs)
    src = torch.full((batch_size, longest), PAD, dtype=torch.long)
    tgt = torch.full((batch_size, longest + 2), PAD, dtype=torch.long)
    for i, s in enumerate(seqs):
        src[i, :len(s)] = torch.tensor(s)
        tgt[i, :len(s) + 2] = torch.tensor([SOS] + list(reversed(s)) + [EOS])
    return src.to(device), tgt.to(device)


def padding_mask(x, pad=PAD):
    return (x != pad).view(x.size(0), 1, 1, x.size(1))


def target_mask(x, pad=PAD):
    n = x.size(1)
    future_ok = torch.arange(n, device=x.device)[None, :] <= torch.arange(n, device=x.device)[:, None]
    return padding_mask(x, pad) & future_ok.view(1, 1, n, n)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        pos = torch.arange(max_len, dtype=torch.float).unsqueeze(1)
        i2 = torch.arange(0, d_model, 2, dtype=torch.float)
        angle = pos / torch.pow(10000.0, i2 / d_model)
        pe = torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1).flatten(1)  # interleave sin, cos
        self.register_buffer('pe', pe.unsqueeze(0), persistent=True)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.drop(x + self.pe[:, :x.size(1)])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.cfg = Config(d_model=d_model, n_heads=num_heads)
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.attn_drop = nn.Dropout(dropout)

    def _heads(self, x):
        B, T, _ = x.shape
        return x.view(B, T, self.cfg.n_heads, self.cfg.head_dim).transpose(1, 2)

    def forward(self, q, k, v, mask=None):
        B, Tq, D = q.shape
        Q, K, V = self._heads(self.q_proj(q)), self._heads(self.k_proj(k)), self._heads(self.v_proj(v))
        scores = torch.einsum('bhqd,bhkd->bhqk', Q, K) / math.sqrt(self.cfg.head_dim)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)
        attn = F.softmax(scores, dim=-1)
        ctx = torch.einsum('bhqk,bhkd->bhqd', self.attn_drop(attn), V)
        ctx = ctx.transpose(1, 2).reshape(B, Tq, D)
        return self.out_proj(ctx), attn


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Dropout(dropout),
                                 nn.Linear(d_ff, d_model))

    def forward(self, x):
        return self.seq(x)


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.sa = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.ln_sa = nn.LayerNorm(d_model)
        self.ln_ff = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        x = self.ln_sa(x + self.drop(self.sa(x, x, x, mask)[0]))
        x = self.ln_ff(x + self.drop(self.ff(x)))
        return x


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.sa = MultiHeadAttention(d_model, h, dropout)
        self.xa = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.ln_sa = nn.LayerNorm(d_model)
        self.ln_xa = nn.LayerNorm(d_model)
        self.ln_ff = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        x = self.ln_sa(x + self.drop(self.sa(x, x, x, tgt_mask)[0]))
        xa, cross = self.xa(x, memory, memory, src_mask)
        x = self.ln_xa(x + self.drop(xa))
        x = self.ln_ff(x + self.drop(self.ff(x)))
        return x, cross


class MiniTransformer(nn.Module):
    def __init__(self, vocab=VOCAB, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1,
                 max_len=64):
        super().__init__()
        self.cfg = cfg = Config(vocab, d_model, h, d_ff, num_layers, dropout, max_len)
        self.src_emb = nn.Embedding(cfg.vocab, cfg.d_model, padding_idx=PAD)
        self.tgt_emb = nn.Embedding(cfg.vocab, cfg.d_model, padding_idx=PAD)
        self.pos = PositionalEncoding(cfg.d_model, cfg.max_len, cfg.dropout)
        self.enc = nn.ModuleList(EncoderLayer(cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.dropout)
                                 for _ in range(cfg.n_layers))
        self.dec = nn.ModuleList(DecoderLayer(cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.dropout)
                                 for _ in range(cfg.n_layers))
        self.generator = nn.Linear(cfg.d_model, cfg.vocab)
        self._init_weights()

    def _init_weights(self):
        for name, p in self.named_parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src, src_mask):
        x = self.pos(self.src_emb(src) * self.cfg.d_model ** 0.5)
        for layer in self.enc:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, tgt_mask, src_mask):
        x = self.pos(self.tgt_emb(tgt) * self.cfg.d_model ** 0.5)
        maps = []
        for layer in self.dec:
            x, cross = layer(x, memory, tgt_mask, src_mask)
            maps.append(cross)
        return x, maps

    def forward(self, src, tgt_in):
        src_mask = padding_mask(src)
        memory = self.encode(src, src_mask)
        x, maps = self.decode(tgt_in, memory, target_mask(tgt_in), src_mask)
        return self.generator(x), maps


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    tc = TrainConfig(steps=steps, batch_size=batch_size, lr=lr, warmup=warmup, log_every=log_every)
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=tc.lr, betas=tc.betas, eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / tc.warmup, 1.0))
    for step in range(1, tc.steps + 1):
        src, tgt = make_batch(tc.batch_size, device=device)
        logits, _ = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt[:, 1:].reshape(-1),
                               ignore_index=PAD)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), tc.clip)
        opt.step()
        if step % tc.log_every == 0 or step == 1:
            print(f"step {step:5d} | loss {loss.item():.4f} | lr {sched.get_last_lr()[0]:.2e}")
    sched.step()
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval
    src_mask = padding_mask(src)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    maps = []
    for _ in range(max_len - 1):
        out, maps = model.decode(ys, memory, target_mask(ys), src_mask)
        nxt = model.generator(out[:, -1]).argmax(-1)
        ys = torch.cat([ys, nxt[:, None]], dim=1)
        finished |= nxt == EOS
        if finished.all():
            break
    return ys, maps
