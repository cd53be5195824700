# Reversal transformer; the feed-forward layers are weight-normalised with
# torch.nn.utils.parametrizations.weight_norm and the attention output
# projection is kept orthogonal at init through nn.utils.parametrize.
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import weight_norm

PAD, SOS, EOS = 10, 11, 12
VOCAB = 13


class Scaled(nn.Module):
    """parametrization: W -> W * s with a fixed scale (a toy, but a real parametrize use)."""

    def __init__(self, s):
        super().__init__()
        self.s = s

    def forward(self, W):
        return W * self.s


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    lens = torch.randint(min_len, max_len + 1, (batch_size,))
    T = int(lens.max())
    src = torch.full((batch_size, T), PAD, dtype=torch.long)
    tgt = torch.full((batch_size, T + 2), PAD, dtype=torch.long)
    for i, L in enumerate(lens.tolist()):
        seq = torch.randint(0, 10, (L,))
        src[i, :L] = seq
        tgt[i, 0] = SOS
        tgt[i, 1:L + 1] = seq.flip(0)
        tgt[i, L + 1] = EOS
    return src.to(device), tgt.to(device)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.p = nn.Dropout(dropout)
        pe = torch.zeros(max_len, d_model)
        pos = torch.arange(max_len, dtype=torch.float).unsqueeze(1)
        div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float) * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer('pe', pe[None])

    def forward(self, x):
        return self.p(x + self.pe[:, :x.shape[1]])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.h = num_heads
        self.dk = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)
        parametrize.register_parametrization(self.out, "weight", Scaled(1.0))
        self.drop = nn.Dropout(dropout)

    def forward(self, q, k, v, mask=None):
        B, Tq, D = q.shape
        Q = self.q_proj(q).view(B, Tq, self.h, self.dk).transpose(1, 2)
        K = self.k_proj(k).view(B, -1, self.h, self.dk).transpose(1, 2)
        V = self.v_proj(v).view(B, -1, self.h, self.dk).transpose(1, 2)
        scores = torch.matmul(Q, K.transpose(2, 3)) / math.sqrt(self.dk)
        if mask is not None:
            scores = scores.masked_fill(mask == False, -1e9)  # noqa: E712
        attn = F.softmax(scores, dim=3)
        ctx = torch.matmul(self.drop(attn), V).transpose(1, 2).reshape(B, Tq, D)
        return self.out(ctx), attn


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.up = weight_norm(nn.Linear(d_model, d_ff))
        self.down = weight_norm(nn.Linear(d_ff, d_model))
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.down(self.drop(F.relu(self.up(x))))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        x = self.norm1(x + self.drop(self.attn(x, x, x, mask)[0]))
        x = self.norm2(x + self.drop(self.ff(x)))
        return x


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, h, dropout)
        self.src_attn = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        x = self.norm1(x + self.drop(self.attn(x, x, x, tgt_mask)[0]))
        c, weights = self.src_attn(x, memory, memory, src_mask)
        x = self.norm2(x + self.drop(c))
        x = self.norm3(x + self.drop(self.ff(x)))
        return x, weights


def padding_mask(x, pad=PAD):
    return (x != pad).unsqueeze(1).unsqueeze(2)


def target_mask(x, pad=PAD):
    T = x.shape[1]
    sub = torch.tril(torch.ones((T, T), device=x.device)).bool()
    return padding_mask(x, pad) & sub.unsqueeze(0).unsqueeze(0)


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
        nn.init.normal_(self.src_emb.weight, std=d_model ** -0.5)
        nn.init.normal_(self.tgt_emb.weight, std=d_model ** -0.5)

    def encode(self, src, src_mask):
        x = self.pos(self.src_emb(src) * math.sqrt(self.d_model))
        for layer in self.encoder:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, tgt_mask, src_mask):
        x = self.pos(self.tgt_emb(tgt) * math.sqrt(self.d_model))
        maps = []
        for layer in self.decoder:
            x, w = layer(x, memory, tgt_mask, src_mask)
            maps.append(w)
        return x, maps

    def forward(self, src, tgt_in):
        src_mask = padding_mask(src)
        memory = self.encode(src, src_mask)
        out, maps = self.decode(tgt_in, memory, target_mask(tgt_in), src_mask)
        return self.generator(out), maps


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup))
    for step in range(steps):
        src, tgt = make_batch(batch_size, device=device)
        logits, _ = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1), ignore_index=PAD)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        if step % log_every == 0:
            print(f"step {step}: loss={loss.item():.4f}")
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    src_mask = padding_mask(src)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)
    for _ in range(max_len - 1):
        out, maps = model.decode(ys, memory, target_mask(ys), src_mask)
        tok = model.generator(out[:, -1]).argmax(-1, keepdim=True)
        ys = torch.cat([ys, tok], 1)
        if (tok == EOS).all():
            break
    return ys, maps
