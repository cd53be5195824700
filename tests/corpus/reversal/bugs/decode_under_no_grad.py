"""Pre-norm encoder-decoder for sequence reversal, with activation checkpointing
(torch.utils.checkpoint) on every layer while training to save memory."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

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
        tgt[i, 0], tgt[i, L + 1] = SOS, EOS
        tgt[i, 1:L + 1] = s.flip(0)
    return src.to(device), tgt.to(device)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        pe = torch.zeros(max_len, d_model)
        pos = torch.arange(max_len).unsqueeze(1).float()
        div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
        self.register_buffer('pe', pe.unsqueeze(0))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(x + self.pe[:, :x.size(1)])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.h, self.dk = num_heads, d_model // num_heads
        self.Wq, self.Wk, self.Wv, self.Wo = (nn.Linear(d_model, d_model) for _ in range(4))
        self.drop = nn.Dropout(dropout)

    def forward(self, q, k, v, mask=None):
        B, Tq, D = q.shape
        sh = lambda t: t.view(B, -1, self.h, self.dk).transpose(1, 2)
        Q, K, V = sh(self.Wq(q)), sh(self.Wk(k)), sh(self.Wv(v))
        s = Q @ K.transpose(-2, -1) / math.sqrt(self.dk)
        if mask is not None:
            s = s.masked_fill(mask.logical_not(), -1e9)
        p = s.softmax(-1)
        o = (self.drop(p) @ V).transpose(1, 2).reshape(B, Tq, D)
        return self.Wo(o), p


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Dropout(dropout), nn.Linear(d_ff, d_model))

    def forward(self, x):
        return self.seq(x)


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn, self.ff = MultiHeadAttention(d_model, h, dropout), FeedForward(d_model, d_ff, dropout)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        y = self.ln1(x)
        x = x + self.drop(self.attn(y, y, y, mask)[0])
        return x + self.drop(self.ff(self.ln2(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.ln1, self.ln2, self.ln3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.cross_attn = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        y = self.ln1(x)
        x = x + self.drop(self.self_attn(y, y, y, tgt_mask)[0])
        c, w = self.cross_attn(self.ln2(x), memory, memory, src_mask)
        x = x + self.drop(c)
        return x + self.drop(self.ff(self.ln3(x))), w


def padding_mask(x, pad=PAD):
    return (x != pad).unsqueeze(1).unsqueeze(2)


def target_mask(x, pad=PAD):
    T = x.size(1)
    return padding_mask(x, pad) & torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))[None, None]


class MiniTransformer(nn.Module):
    def __init__(self, vocab=13, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        super().__init__()
        self.d_model = d_model
        self.src_emb = nn.Embedding(vocab, d_model)
        self.tgt_emb = nn.Embedding(vocab, d_model)
        self.pos = PositionalEncoding(d_model, max_len, dropout)
        self.enc = nn.ModuleList([EncoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.dec = nn.ModuleList([DecoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.enc_ln, self.dec_ln = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.generator = nn.Linear(d_model, vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def _run(self, layer, *args):
        # recompute activations in backward instead of storing them
        if self.training and torch.is_grad_enabled():
            return checkpoint(layer, *args, use_reentrant=False)
        return layer(*args)

    def encode(self, src, src_mask):
        x = self.pos(self.src_emb(src) * math.sqrt(self.d_model))
        for layer in self.enc:
            x = self._run(layer, x, src_mask)
        return self.enc_ln(x)

    @torch.no_grad()
    def decode(self, tgt, memory, tgt_mask, src_mask):
        x = self.pos(self.tgt_emb(tgt) * math.sqrt(self.d_model))
        maps = []
        for layer in self.dec:
            x, w = self._run(layer, x, memory, tgt_mask, src_mask)
            maps.append(w)
        return self.dec_ln(x), maps

    def forward(self, src, tgt_in):
        sm = padding_mask(src)
        mem = self.encode(src, sm)
        out, maps = self.decode(tgt_in, mem, target_mask(tgt_in), sm)
        return self.generator(out), maps


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))
    for step in range(1, steps + 1):
        src, tgt = make_batch(batch_size, device=device)
        logits, _ = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1), ignore_index=PAD)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % log_every == 0:
            print(f"step {step} loss {loss.item():.4f}")
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    sm = padding_mask(src)
    mem = model.encode(src, sm)
    ys = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)
    for _ in range(max_len - 1):
        out, maps = model.decode(ys, mem, target_mask(ys), sm)
        nxt = model.generator(out[:, -1]).argmax(-1, keepdim=True)
        ys = torch.cat([ys, nxt], 1)
        if (nxt == EOS).all():
            break
    return ys, maps
