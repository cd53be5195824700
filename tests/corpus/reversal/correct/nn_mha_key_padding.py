"""nn.MultiheadAttention (batch_first) with its two native masks:
key_padding_mask (B, Tk) and attn_mask (Tq, Tk), both True = blocked.
My padding_mask returns the (B, T) key-padding form; target_mask returns
the (B, 1, T, T) combined form and the attention wrapper splits it back."""
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
        self.drop = nn.Dropout(dropout)
        pe = torch.zeros(max_len, d_model)
        pos = torch.arange(max_len).unsqueeze(1).float()
        div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer('pe', pe.unsqueeze(0))

    def forward(self, x):
        return self.drop(x + self.pe[:, :x.size(1)])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.h = num_heads
        self.mha = nn.MultiheadAttention(d_model, num_heads, dropout=dropout, batch_first=True)

    def forward(self, q, k, v, mask=None):
        kpm, am = None, None
        if mask is not None:
            # float -1e9 instead of the bool masks: a fully padded row must not become NaN
            bias = torch.zeros(mask.shape, device=q.device).masked_fill(mask, -1e9)
            if mask.dim() == 2:                      # (B, Tk) key padding
                kpm = bias
            else:                                    # (B, 1, Tq, Tk) full mask
                B, _, Tq, Tk = mask.shape
                am = bias.expand(B, self.h, Tq, Tk).reshape(B * self.h, Tq, Tk)
        out, w = self.mha(q, k, v, key_padding_mask=kpm, attn_mask=am, average_attn_weights=False)
        return out, w


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
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        x = self.ln1(x + self.drop(self.attn(x, x, x, mask)[0]))
        return self.ln2(x + self.drop(self.ff(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, h, dropout)
        self.cross = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.ln1, self.ln2, self.ln3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        x = self.ln1(x + self.drop(self.attn(x, x, x, tgt_mask)[0]))
        c, w = self.cross(x, memory, memory, src_mask)
        x = self.ln2(x + self.drop(c))
        return self.ln3(x + self.drop(self.ff(x))), w


def padding_mask(x, pad=PAD):
    return x == pad                                          # (B, T), True = padding


def target_mask(x, pad=PAD):
    T = x.size(1)
    ahead = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), 1)
    return padding_mask(x, pad)[:, None, None, :] | ahead    # (B, 1, T, T), True = blocked


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
        for n, p in self.named_parameters():
            if p.dim() > 1 and 'mha' not in n:
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
            x, w = layer(x, memory, tgt_mask, src_mask)
            maps.append(w)
        return x, maps

    def forward(self, src, tgt_in):
        sm = padding_mask(src)
        memory = self.encode(src, sm)
        x, maps = self.decode(tgt_in, memory, target_mask(tgt_in), sm)
        return self.generator(x), maps


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))
    lossf = nn.CrossEntropyLoss(ignore_index=PAD)
    for step in range(steps):
        src, tgt = make_batch(batch_size, device=device)
        logits, _ = model(src, tgt[:, :-1])
        loss = lossf(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
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
