"""
Shared-vocabulary reversal model: one embedding table for src and tgt,
and the output projection reuses that table too (weight tying, Press & Wolf 2017).
Embeddings are multiplied by sqrt(d_model) on the way in, as in the paper.
"""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, SOS, EOS, VOCAB = 10, 11, 12, 13


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    lengths = torch.randint(min_len, max_len + 1, (batch_size,))
    T = int(lengths.max())
    src = torch.full((batch_size, T), PAD, dtype=torch.long, device=device)
    tgt = torch.full((batch_size, T + 2), PAD, dtype=torch.long, device=device)
    for i, L in enumerate(lengths.tolist()):
        x = torch.randint(0, 10, (L,), device=device)
        src[i, :L] = x
        tgt[i, 0] = SOS
        tgt[i, 1:L + 1] = torch.flip(x, [0])
        tgt[i, L + 1] = EOS
    return src, tgt


def padding_mask(x, pad=PAD):
    return (x == pad)[:, None, None, :]


def target_mask(x, pad=PAD):
    T = x.shape[1]
    return padding_mask(x, pad) & torch.ones(T, T, dtype=torch.bool, device=x.device).tril()


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        pos = torch.arange(max_len, dtype=torch.float)[:, None]
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float) / d_model))
        sinusoid = pos * inv_freq[None, :]
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = sinusoid.sin()
        pe[:, 1::2] = sinusoid.cos()
        self.register_buffer('pe', pe[None])

    def forward(self, x):
        return self.dropout(x + self.pe[:, :x.shape[1]])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.nh, self.hd = num_heads, d_model // num_heads
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, d_model)
        self.o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, q, k, v, mask=None):
        B, Tq, _ = q.shape
        Tk = k.shape[1]
        qh = self.q(q).view(B, Tq, self.nh, self.hd).transpose(1, 2)
        kh = self.k(k).view(B, Tk, self.nh, self.hd).transpose(1, 2)
        vh = self.v(v).view(B, Tk, self.nh, self.hd).transpose(1, 2)
        att = (qh @ kh.transpose(2, 3)) * (1.0 / math.sqrt(self.hd))
        if mask is not None:
            att = att.masked_fill(mask == 0, float(-1e9))
        att = F.softmax(att, dim=-1)
        y = self.dropout(att) @ vh
        y = y.transpose(1, 2).contiguous().view(B, Tq, self.nh * self.hd)
        return self.o(y), att


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.c_fc = nn.Linear(d_model, d_ff)
        self.c_proj = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.c_proj(self.dropout(F.relu(self.c_fc(x))))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, h, dropout)
        self.mlp = FeedForward(d_model, d_ff, dropout)
        self.ln_1 = nn.LayerNorm(d_model)
        self.ln_2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        x = self.ln_1(x + self.dropout(self.attn(x, x, x, mask)[0]))
        x = self.ln_2(x + self.dropout(self.mlp(x)))
        return x


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, h, dropout)
        self.xattn = MultiHeadAttention(d_model, h, dropout)
        self.mlp = FeedForward(d_model, d_ff, dropout)
        self.ln_1 = nn.LayerNorm(d_model)
        self.ln_2 = nn.LayerNorm(d_model)
        self.ln_3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        x = self.ln_1(x + self.dropout(self.attn(x, x, x, tgt_mask)[0]))
        c, cross = self.xattn(x, memory, memory, src_mask)
        x = self.ln_2(x + self.dropout(c))
        x = self.ln_3(x + self.dropout(self.mlp(x)))
        return x, cross


class MiniTransformer(nn.Module):
    def __init__(self, vocab=VOCAB, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1,
                 max_len=64):
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(vocab, d_model, padding_idx=PAD)   # shared src/tgt table
        self.pos = PositionalEncoding(d_model, max_len, dropout)
        self.encoder = nn.ModuleList([EncoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.decoder = nn.ModuleList([DecoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.generator = nn.Linear(d_model, vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        self.generator.weight = self.embed.weight                       # tie AFTER init

    def _embed(self, tokens):
        return self.pos(self.embed(tokens) * math.sqrt(self.d_model))

    def encode(self, src, src_mask):
        x = self._embed(src)
        for blk in self.encoder:
            x = blk(x, src_mask)
        return x

    def decode(self, tgt, memory, tgt_mask, src_mask):
        x = self._embed(tgt)
        maps = []
        for blk in self.decoder:
            x, cross = blk(x, memory, tgt_mask, src_mask)
            maps.append(cross)
        return x, maps

    def forward(self, src, tgt_in):
        src_mask = padding_mask(src)
        memory = self.encode(src, src_mask)
        x, maps = self.decode(tgt_in, memory, target_mask(tgt_in), src_mask)
        return self.generator(x), maps


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / warmup, 1.0))
    for it in range(1, steps + 1):
        src, tgt = make_batch(batch_size, device=device)
        logits, _ = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), tgt[:, 1:].reshape(-1),
                               ignore_index=PAD)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if it % log_every == 0 or it == 1:
            print(f"it {it:5d} loss {loss.item():.4f}")
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    src_mask = padding_mask(src)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)
    maps = []
    for _ in range(max_len - 1):
        h, maps = model.decode(ys, memory, target_mask(ys), src_mask)
        tok = model.generator(h[:, -1]).argmax(-1, keepdim=True)
        ys = torch.cat([ys, tok], dim=1)
        if (tok == EOS).all():
            break
    return ys, maps
