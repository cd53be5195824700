"""Mini Transformer, reversal task. Organised around a small Trainer class;
greedy decoding keeps a `finished` flag per sequence and pads finished rows
with PAD, re-running the decoder over the whole prefix every step (no KV cache)."""
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
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        pe = torch.zeros(max_len, d_model)
        pos = torch.arange(max_len).unsqueeze(1).float()
        div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer('pe', pe.unsqueeze(0))

    def forward(self, x):
        return self.dropout(x + self.pe[:, :x.size(1)])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.h = num_heads
        self.d_k = d_model // num_heads
        self.lin_q = nn.Linear(d_model, d_model)
        self.lin_k = nn.Linear(d_model, d_model)
        self.lin_v = nn.Linear(d_model, d_model)
        self.lin_o = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, q, k, v, mask=None):
        B, Tq, D = q.shape
        Tk = k.shape[1]
        # heads folded into the batch dimension: (B*h, T, d_k)
        Q = self.lin_q(q).view(B, Tq, self.h, self.d_k).permute(0, 2, 1, 3).reshape(B * self.h, Tq, self.d_k)
        K = self.lin_k(k).view(B, Tk, self.h, self.d_k).permute(0, 2, 1, 3).reshape(B * self.h, Tk, self.d_k)
        V = self.lin_v(v).view(B, Tk, self.h, self.d_k).permute(0, 2, 1, 3).reshape(B * self.h, Tk, self.d_k)
        scores = torch.baddbmm(torch.zeros(B * self.h, Tq, Tk, device=q.device), Q, K.transpose(1, 2),
                               alpha=1.0 / math.sqrt(self.d_k))
        if mask is not None:
            m = mask.expand(B, self.h, Tq, Tk).reshape(B * self.h, Tq, Tk)
            scores = scores.masked_fill(m == 0, -1e9)
        p = F.softmax(scores, dim=-1)
        out = torch.bmm(self.drop(p), V)                                  # (B*h, Tq, d_k)
        out = out.view(B, self.h, Tq, self.d_k).reshape(B, Tq, D)
        return self.lin_o(out), p.view(B, self.h, Tq, Tk)


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
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        x = self.norm1(x + self.drop(self.attn(x, x, x, mask)[0]))
        return self.norm2(x + self.drop(self.ff(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, h, dropout)
        self.cross = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        x = self.norm1(x + self.drop(self.attn(x, x, x, tgt_mask)[0]))
        c, w = self.cross(x, memory, memory, src_mask)
        x = self.norm2(x + self.drop(c))
        return self.norm3(x + self.drop(self.ff(x))), w


def padding_mask(x, pad=PAD):
    return (x != pad).unsqueeze(1).unsqueeze(2).to(torch.uint8)      # 1 = real token


def target_mask(x, pad=PAD):
    T = x.size(1)
    causal = torch.tril(torch.ones(T, T, dtype=torch.uint8, device=x.device))
    return padding_mask(x, pad) * causal                               # 1 = may attend


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
        x, maps = self.decode(tgt_in, memory, target_mask(tgt_in), src_mask)
        return self.generator(x), maps


class Trainer:
    def __init__(self, model, lr, warmup, device):
        self.model = model.to(device)
        self.device = device
        self.opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lambda s: min(1.0, (s + 1) / warmup))
        self.history = []

    def step(self, src, tgt):
        self.model.train()
        logits, _ = self.model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1), ignore_index=PAD)
        self.opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.sched.step()
        self.history.append(loss.item())
        return loss.item()


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    trainer = Trainer(model, lr, warmup, device)
    for step in range(steps):
        loss = trainer.step(*make_batch(batch_size, device=device))
        if step % log_every == 0:
            print(f'step {step}: {loss:.4f}')
    return trainer.model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    B = src.size(0)
    src_mask = padding_mask(src)
    memory = model.encode(src, src_mask)
    ys = torch.full((B, 1), SOS, dtype=torch.long, device=src.device)
    finished = torch.zeros(B, dtype=torch.bool, device=src.device)
    maps = []
    step = 0
    while step < max_len - 1 and not finished.all():
        h, maps = model.decode(ys, memory, target_mask(ys), src_mask)
        nxt = model.generator(h[:, -1]).argmax(-1)
        nxt = torch.where(finished, torch.full_like(nxt, PAD), nxt)
        ys = torch.cat([ys, nxt.unsqueeze(1)], dim=1)
        finished |= nxt == EOS
        step += 1
    return ys, maps
