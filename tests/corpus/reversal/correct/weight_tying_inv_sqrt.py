"""Reversal transformer with one shared token embedding (source, target and output
projection are tied) and an inverse-square-root learning-rate schedule that I set
by hand on the param groups every step."""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, SOS, EOS = 10, 11, 12
VOCAB = 13


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    lens = torch.randint(min_len, max_len + 1, (batch_size,))
    src = torch.full((batch_size, lens.max()), PAD, dtype=torch.long)
    tgt = torch.full((batch_size, lens.max() + 2), PAD, dtype=torch.long)
    for i, L in enumerate(lens):
        x = torch.randint(0, 10, (L,))
        src[i, :L] = x
        tgt[i, :L + 2] = torch.tensor([SOS] + x.flip(0).tolist() + [EOS])
    return src.to(device), tgt.to(device)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        pos = torch.arange(max_len).unsqueeze(1)
        div = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(1, max_len, d_model)
        pe[0, :, 0::2] = torch.sin(pos * div)
        pe[0, :, 1::2] = torch.cos(pos * div)
        self.register_buffer('pe', pe)

    def forward(self, x):
        return self.dropout(x + self.pe[:, :x.size(1), :])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.h, self.d_k = num_heads, d_model // num_heads
        self.q = nn.Linear(d_model, d_model, bias=False)
        self.k = nn.Linear(d_model, d_model, bias=False)
        self.v = nn.Linear(d_model, d_model, bias=False)
        self.o = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)

    def heads(self, x):
        return x.unflatten(-1, (self.h, self.d_k)).transpose(1, 2)   # (B, h, T, d_k)

    def forward(self, q, k, v, mask=None):
        Q, K, V = self.heads(self.q(q)), self.heads(self.k(k)), self.heads(self.v(v))
        s = Q @ K.mT / self.d_k ** 0.5
        if mask is not None:
            s = s.masked_fill(~mask, torch.finfo(s.dtype).min)
        a = s.softmax(-1)
        out = (self.drop(a) @ V).transpose(1, 2).flatten(2)
        return self.o(out), a


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Dropout(dropout), nn.Linear(d_ff, d_model))

    def forward(self, x):
        return self.net(x)


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.attn, self.ff = MultiHeadAttention(d_model, h, dropout), FeedForward(d_model, d_ff, dropout)
        self.n1, self.n2, self.drop = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.Dropout(dropout)

    def forward(self, x, mask=None):
        x = self.n1(x + self.drop(self.attn(x, x, x, mask)[0]))
        return self.n2(x + self.drop(self.ff(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.cross_attn = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.n1, self.n2, self.n3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.drop = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        x = self.n1(x + self.drop(self.self_attn(x, x, x, tgt_mask)[0]))
        c, w = self.cross_attn(x, memory, memory, src_mask)
        x = self.n2(x + self.drop(c))
        return self.n3(x + self.drop(self.ff(x))), w


def padding_mask(x, pad=PAD):
    return (x != pad)[:, None, None]


def target_mask(x, pad=PAD):
    n = x.shape[1]
    return padding_mask(x, pad) & torch.ones(n, n, dtype=torch.bool, device=x.device).tril()


class MiniTransformer(nn.Module):
    def __init__(self, vocab=13, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(vocab, d_model)                 # shared by encoder and decoder
        nn.init.normal_(self.embed.weight, 0.0, d_model ** -0.5)
        self.pos = PositionalEncoding(d_model, max_len, dropout)
        self.enc = nn.ModuleList(EncoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers))
        self.dec = nn.ModuleList(DecoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers))
        self.generator = nn.Linear(d_model, vocab, bias=False)
        self.generator.weight = self.embed.weight                 # weight tying

    def encode(self, src, src_mask):
        x = self.pos(self.embed(src) * math.sqrt(self.d_model))
        for layer in self.enc:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, tgt_mask, src_mask):
        x = self.pos(self.embed(tgt) * math.sqrt(self.d_model))
        maps = []
        for layer in self.dec:
            x, w = layer(x, memory, tgt_mask, src_mask)
            maps += [w]
        return x, maps

    def forward(self, src, tgt_in):
        sm = padding_mask(src)
        x, maps = self.decode(tgt_in, self.encode(src, sm), target_mask(tgt_in), sm)
        return self.generator(x), maps


def inv_sqrt_lr(step, base_lr, warmup):
    step = max(step, 1)
    return base_lr * min(step / warmup, math.sqrt(warmup / step))


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    for step in range(1, steps + 1):
        for g in opt.param_groups:
            g['lr'] = inv_sqrt_lr(step, lr, warmup)
        src, tgt = make_batch(batch_size, device=device)
        logits, _ = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % log_every == 0:
            print(f'{step:5d} {loss.item():.4f} lr={opt.param_groups[0]["lr"]:.2e}')
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    sm = padding_mask(src)
    mem = model.encode(src, sm)
    ys = src.new_full((src.size(0), 1), SOS)
    for _ in range(max_len - 1):
        x, maps = model.decode(ys, mem, target_mask(ys), sm)
        ys = torch.cat([ys, model.generator(x[:, -1]).argmax(-1, keepdim=True)], 1)
        if (ys[:, -1] == EOS).all():
            break
    return ys, maps
