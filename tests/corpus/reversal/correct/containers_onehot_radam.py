"""
Encoder/Decoder container modules, embeddings done as one_hot @ weight,
the sqrt(d_model) scale applied inside the positional module, and RAdam
(its variance rectification replaces an explicit warmup; the warmup
argument is accepted but unused).
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


class OneHotEmbedding(nn.Module):
    def __init__(self, vocab, d_model):
        super().__init__()
        self.vocab = vocab
        self.weight = nn.Parameter(torch.randn(vocab, d_model) / math.sqrt(d_model))

    def forward(self, idx):
        return F.one_hot(idx, self.vocab).to(self.weight.dtype) @ self.weight


class PositionalEncoding(nn.Module):
    """x -> dropout(x * sqrt(d) + PE)."""

    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.scale = math.sqrt(d_model)
        self.dropout = nn.Dropout(dropout)
        pe = torch.zeros(max_len, d_model)
        pos = torch.arange(max_len).unsqueeze(1).float()
        div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer('pe', pe.unsqueeze(0))

    def forward(self, x):
        return self.dropout(x * self.scale + self.pe[:, :x.size(1)])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.h, self.dk = num_heads, d_model // num_heads
        self.q = nn.Linear(d_model, d_model)
        self.kv = nn.Linear(d_model, 2 * d_model)
        self.o = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, q, k, v, mask=None):
        B, Tq, D = q.shape
        Q = self.q(q).view(B, Tq, self.h, self.dk).transpose(1, 2)
        K = self.kv(k)[..., :D].reshape(B, -1, self.h, self.dk).transpose(1, 2)
        V = self.kv(v)[..., D:].reshape(B, -1, self.h, self.dk).transpose(1, 2)
        att = torch.einsum('bhqd,bhkd->bhqk', Q, K) / math.sqrt(self.dk)
        if mask is not None:
            att = att.masked_fill(~mask, -1e9)
        att = att.softmax(-1)
        out = torch.einsum('bhqk,bhkd->bhqd', self.drop(att), V)
        return self.o(out.transpose(1, 2).reshape(B, Tq, D)), att


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Dropout(dropout), nn.Linear(d_ff, d_model))

    def forward(self, x):
        return self.net(x)


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.ln = nn.ModuleList([nn.LayerNorm(d_model), nn.LayerNorm(d_model)])
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        x = self.ln[0](x + self.drop(self.attn(x, x, x, mask)[0]))
        return self.ln[1](x + self.drop(self.ff(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, h, dropout)
        self.cross = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.ln = nn.ModuleList([nn.LayerNorm(d_model) for _ in range(3)])
        self.drop = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        x = self.ln[0](x + self.drop(self.attn(x, x, x, tgt_mask)[0]))
        c, w = self.cross(x, memory, memory, src_mask)
        x = self.ln[1](x + self.drop(c))
        return self.ln[2](x + self.drop(self.ff(x))), w


class Encoder(nn.Module):
    def __init__(self, vocab, d_model, h, d_ff, n, dropout, max_len):
        super().__init__()
        self.embed = OneHotEmbedding(vocab, d_model)
        self.pos = PositionalEncoding(d_model, max_len, dropout)
        self.layers = nn.ModuleList([EncoderLayer(d_model, h, d_ff, dropout) for _ in range(n)])

    def forward(self, src, mask):
        x = self.pos(self.embed(src))
        for layer in self.layers:
            x = layer(x, mask)
        return x


class Decoder(nn.Module):
    def __init__(self, vocab, d_model, h, d_ff, n, dropout, max_len):
        super().__init__()
        self.embed = OneHotEmbedding(vocab, d_model)
        self.pos = PositionalEncoding(d_model, max_len, dropout)
        self.layers = nn.ModuleList([DecoderLayer(d_model, h, d_ff, dropout) for _ in range(n)])

    def forward(self, tgt, memory, tgt_mask, src_mask):
        x = self.pos(self.embed(tgt))
        maps = []
        for layer in self.layers:
            x, w = layer(x, memory, tgt_mask, src_mask)
            maps.append(w)
        return x, maps


def padding_mask(x, pad=PAD):
    return (x != pad).unsqueeze(1).unsqueeze(2)


def target_mask(x, pad=PAD):
    T = x.size(1)
    return padding_mask(x, pad) & torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))


class MiniTransformer(nn.Module):
    def __init__(self, vocab=13, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        super().__init__()
        self.encoder = Encoder(vocab, d_model, h, d_ff, num_layers, dropout, max_len)
        self.decoder = Decoder(vocab, d_model, h, d_ff, num_layers, dropout, max_len)
        self.generator = nn.Linear(d_model, vocab)
        for name, p in self.named_parameters():
            if p.dim() > 1 and 'embed' not in name:
                nn.init.xavier_uniform_(p)

    def encode(self, src, src_mask):
        return self.encoder(src, src_mask)

    def decode(self, tgt, memory, tgt_mask, src_mask):
        return self.decoder(tgt, memory, tgt_mask, src_mask)

    def forward(self, src, tgt_in):
        sm = padding_mask(src)
        x, maps = self.decode(tgt_in, self.encode(src, sm), target_mask(tgt_in), sm)
        return self.generator(x), maps


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device).train()
    opt = torch.optim.RAdam(model.parameters(), lr=lr, betas=(0.9, 0.98))
    for step in range(steps):
        src, tgt = make_batch(batch_size, device=device)
        logits, _ = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % log_every == 0:
            print(step, loss.item())
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    sm = padding_mask(src)
    memory = model.encode(src, sm)
    ys = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)
    for _ in range(max_len - 1):
        x, maps = model.decode(ys, memory, target_mask(ys), sm)
        nxt = model.generator(x[:, -1]).argmax(-1, keepdim=True)
        ys = torch.cat([ys, nxt], 1)
        if (nxt == EOS).all():
            break
    return ys, maps
