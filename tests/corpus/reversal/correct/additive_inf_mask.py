"""Reversal transformer with additive float masks: 0 where attention is allowed,
-inf where it is not. Rows that end up fully masked (an all-padding input) would
be NaN after the softmax, so they are given zero attention explicitly (before the
softmax, so the backward pass stays finite too).

Loss: cross-entropy with label smoothing written out by hand."""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, SOS, EOS, VOCAB = 10, 11, 12, 13
SMOOTH = 0.1


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    lens = torch.randint(min_len, max_len + 1, (batch_size,))
    L = int(lens.max())
    src = torch.full((batch_size, L), PAD, dtype=torch.long)
    tgt = torch.full((batch_size, L + 2), PAD, dtype=torch.long)
    for i in range(batch_size):
        k = int(lens[i])
        d = torch.randint(0, 10, (k,))
        src[i, :k] = d
        tgt[i, 0] = SOS
        tgt[i, 1:k + 1] = d.flip(0)
        tgt[i, k + 1] = EOS
    return src.to(device), tgt.to(device)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        pos = torch.arange(max_len).unsqueeze(1).float()
        div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer('pe', pe.unsqueeze(0))

    def forward(self, x):
        return self.dropout(x + self.pe[:, :x.size(1)])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.h, self.d_k = num_heads, d_model // num_heads
        self.proj = nn.ModuleDict({n: nn.Linear(d_model, d_model) for n in 'qkvo'})
        self.drop = nn.Dropout(dropout)

    def forward(self, q, k, v, mask=None):
        B = q.size(0)
        Q = self.proj['q'](q).view(B, -1, self.h, self.d_k).transpose(1, 2)
        K = self.proj['k'](k).view(B, -1, self.h, self.d_k).transpose(1, 2)
        V = self.proj['v'](v).view(B, -1, self.h, self.d_k).transpose(1, 2)
        scores = Q @ K.transpose(-2, -1) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores + mask                        # additive: 0 or -inf
        dead = torch.isneginf(scores).all(dim=-1, keepdim=True)          # rows with nothing to attend to
        attn = torch.softmax(scores.masked_fill(dead, 0.0), dim=-1).masked_fill(dead, 0.0)
        x = (self.drop(attn) @ V).transpose(1, 2).reshape(B, -1, self.h * self.d_k)
        return self.proj['o'](x), attn


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.l1, self.l2, self.drop = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model), nn.Dropout(dropout)

    def forward(self, x):
        return self.l2(self.drop(F.relu(self.l1(x))))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        x = self.norm1(x + self.drop(self.attn(x, x, x, mask)[0]))
        return self.norm2(x + self.drop(self.ff(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, h, dropout)
        self.enc_attn = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        x = self.norm1(x + self.drop(self.attn(x, x, x, tgt_mask)[0]))
        c, cross = self.enc_attn(x, memory, memory, src_mask)
        x = self.norm2(x + self.drop(c))
        return self.norm3(x + self.drop(self.ff(x))), cross


def padding_mask(x, pad=PAD):
    m = torch.zeros(x.shape, device=x.device)
    m[x == pad] = float('-inf')
    return m[:, None, None, :]


def target_mask(x, pad=PAD):
    T = x.size(1)
    causal = torch.triu(torch.full((T, T), float('-inf'), device=x.device), diagonal=1)
    return padding_mask(x, pad) + causal


class MiniTransformer(nn.Module):
    def __init__(self, vocab=13, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        super().__init__()
        self.d_model = d_model
        self.src_emb = nn.Embedding(vocab, d_model)
        self.tgt_emb = nn.Embedding(vocab, d_model)
        self.pos = PositionalEncoding(d_model, max_len, dropout)
        self.enc = nn.ModuleList([EncoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
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
        maps = []
        for layer in self.dec:
            x, cross = layer(x, memory, tgt_mask, src_mask)
            maps.append(cross)
        return x, maps

    def forward(self, src, tgt_in):
        sm = padding_mask(src)
        memory = self.encode(src, sm)
        x, maps = self.decode(tgt_in, memory, target_mask(tgt_in), sm)
        return self.generator(x), maps


def smoothed_ce(logits, target, eps=SMOOTH, pad=PAD):
    logp = F.log_softmax(logits, dim=-1)                       # (N, V)
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)   # (N,)
    uniform = -logp.mean(dim=-1)
    per_tok = (1 - eps) * nll + eps * uniform
    keep = target != pad
    return per_tok[keep].mean()


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))
    for step in range(steps):
        src, tgt = make_batch(batch_size, device=device)
        logits, _ = model(src, tgt[:, :-1])
        loss = smoothed_ce(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
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
