"""Mini transformer (digit reversal).

Internally everything below the model works sequence-first, (T, B, D), the
layout nn.Transformer used for years: the model transposes once on the way in
(after embedding) and once on the way out. MiniTransformer's own interface is
batch-first like the assignment asks: forward(src (B,T), tgt_in (B,T)) -> (B,T,V).
Masks: True = may attend, (B, 1, Tq, Tk).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, SOS, EOS = 10, 11, 12
VOCAB = 13


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
    """Adds the sinusoid table to a (T, B, D) tensor."""

    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        pos = torch.arange(max_len).unsqueeze(1).float()
        div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(pos * div)
        pe[:, 0, 1::2] = torch.cos(pos * div)
        self.register_buffer('pe', pe)

    def forward(self, x):                      # x: (T, B, D)
        return self.dropout(x + self.pe[:x.size(0)])


class MultiHeadAttention(nn.Module):
    """q: (Tq, B, D), k/v: (Tk, B, D) -> out (Tq, B, D), attn (B, h, Tq, Tk)."""

    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.h = num_heads
        self.dk = d_model // num_heads
        self.wq = nn.Linear(d_model, d_model)
        self.wk = nn.Linear(d_model, d_model)
        self.wv = nn.Linear(d_model, d_model)
        self.wo = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)

    def _heads(self, x):
        T, B, _ = x.shape
        return x.reshape(T, B * self.h, self.dk).transpose(0, 1)     # (B*h, T, dk)

    def forward(self, q, k, v, mask=None):
        Tq, B, D = q.shape
        Tk = k.shape[0]
        Q, K, V = self._heads(self.wq(q)), self._heads(self.wk(k)), self._heads(self.wv(v))
        scores = torch.bmm(Q, K.transpose(1, 2)) / math.sqrt(self.dk)   # (B*h, Tq, Tk)
        scores = scores.view(B, self.h, Tq, Tk)
        if mask is not None:
            scores = scores.masked_fill(~mask, -1e9)
        attn = F.softmax(scores, dim=-1)
        ctx = torch.bmm(self.drop(attn).view(B * self.h, Tq, Tk), V)  # (B*h, Tq, dk)
        ctx = ctx.transpose(0, 1).reshape(Tq, B, D)
        return self.wo(ctx), attn


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Dropout(dropout), nn.Linear(d_ff, d_model))

    def forward(self, x):
        return self.ff(x)


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask=None):           # x: (T, B, D)
        x = self.norm1(x + self.drop(self.self_attn(x, x, x, mask)[0]))
        return self.norm2(x + self.drop(self.ffn(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.cross_attn = MultiHeadAttention(d_model, h, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):   # x: (T, B, D), memory (S, B, D)
        x = self.norm1(x + self.drop(self.self_attn(x, x, x, tgt_mask)[0]))
        c, cross = self.cross_attn(x, memory, memory, src_mask)
        x = self.norm2(x + self.drop(c))
        return self.norm3(x + self.drop(self.ffn(x))), cross


def padding_mask(x, pad=PAD):
    return (x != pad).unsqueeze(1).unsqueeze(1)


def target_mask(x, pad=PAD):
    T = x.size(1)
    return padding_mask(x, pad) & torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))


class MiniTransformer(nn.Module):
    def __init__(self, vocab=13, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        super().__init__()
        self.d_model = d_model
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
        """src (B, S) -> memory (S, B, D), sequence-first like the layers."""
        x = self.src_emb(src).transpose(0, 1) * math.sqrt(self.d_model)
        x = self.pos(x)
        for layer in self.encoder:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, tgt_mask, src_mask):
        """tgt (B, T), memory (S, B, D) -> (B, T, D) batch-first again, cross maps."""
        x = self.pos(self.tgt_emb(tgt).transpose(0, 1) * math.sqrt(self.d_model))
        maps = []
        for layer in self.decoder:
            x, cross = layer(x, memory, tgt_mask, src_mask)
            maps.append(cross)
        return x.transpose(0, 1), maps

    def forward(self, src, tgt_in):
        src_mask = padding_mask(src)
        memory = self.encode(src, src_mask)
        out, maps = self.decode(tgt_in, memory, target_mask(tgt_in), src_mask)
        return self.generator(out), maps


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / warmup, 1.0))
    for step in range(1, steps + 1):
        src, tgt = make_batch(batch_size, device=device)
        logits, _ = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1), ignore_index=PAD)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % log_every == 0 or step == 1:
            print(f"step {step:5d}  loss {loss.item():.4f}")
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    src_mask = padding_mask(src)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)
    for _ in range(max_len - 1):
        out, maps = model.decode(ys, memory, target_mask(ys), src_mask)
        next_tok = model.generator(out[:, -1]).argmax(-1, keepdim=True)
        ys = torch.cat([ys, next_tok], dim=1)
        if (next_tok == EOS).all():
            break
    return ys, maps
