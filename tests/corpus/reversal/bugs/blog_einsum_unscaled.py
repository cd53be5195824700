# "Transformers from scratch" - an encoder-decoder that learns to reverse digits.
# Every head is its own little module with its own query/key/value Linear layers, kept in an
# nn.ModuleList; scores are einsums; the causal triangle is a registered `tril` buffer.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, SOS, EOS = 10, 11, 12
VOCAB = 13


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    lengths = torch.randint(min_len, max_len + 1, (batch_size,))
    T = int(lengths.max())
    src = torch.full((batch_size, T), PAD, dtype=torch.long)
    tgt = torch.full((batch_size, T + 2), PAD, dtype=torch.long)
    for b, n in enumerate(lengths.tolist()):
        digits = torch.randint(0, 10, (n,))
        src[b, :n] = digits
        tgt[b, 0] = SOS
        tgt[b, 1:n + 1] = digits.flip(0)
        tgt[b, n + 1] = EOS
    return src.to(device), tgt.to(device)


class Head(nn.Module):
    """One head of attention."""

    def __init__(self, d_model, head_size, dropout, causal=False, max_len=64):
        super().__init__()
        self.query = nn.Linear(d_model, head_size, bias=False)
        self.key = nn.Linear(d_model, head_size, bias=False)
        self.value = nn.Linear(d_model, head_size, bias=False)
        self.causal = causal
        self.register_buffer('tril', torch.tril(torch.ones(max_len, max_len)))
        self.dropout = nn.Dropout(dropout)
        self.weights = None

    def forward(self, x, context, key_pad):
        # x: (B, Tq, C) queries come from here; context: (B, Tk, C) keys and values come from there
        q = self.query(x)
        k = self.key(context)
        v = self.value(context)
        head_size = q.shape[-1]
        wei = torch.einsum('bqd,bkd->bqk', q, k)       # (B, Tq, Tk)
        if self.causal:
            Tq, Tk = wei.shape[1], wei.shape[2]
            wei = wei.masked_fill(self.tril[:Tq, :Tk] == 0, float('-inf'))
        if key_pad is not None:
            wei = wei.masked_fill(key_pad[:, None, :], -1e9)      # key_pad: (B, Tk) True at PAD; finite: no NaN rows
        wei = F.softmax(wei, dim=-1)
        self.weights = wei
        wei = self.dropout(wei)
        return torch.einsum('bqk,bkd->bqd', wei, v)


class MultiHeadAttention(nn.Module):
    """Several heads side by side, concatenated and projected back."""

    def __init__(self, d_model, num_heads, dropout, causal=False, max_len=64):
        super().__init__()
        head_size = d_model // num_heads
        self.heads = nn.ModuleList([Head(d_model, head_size, dropout, causal, max_len) for _ in range(num_heads)])
        self.proj = nn.Linear(head_size * num_heads, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, context=None, key_pad=None):
        context = x if context is None else context
        out = torch.cat([h(x, context, key_pad) for h in self.heads], dim=-1)
        return self.dropout(self.proj(out))

    def attention_map(self):
        return torch.stack([h.weights for h in self.heads], dim=1)            # (B, heads, Tq, Tk)


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model), nn.Dropout(dropout))

    def forward(self, x):
        return self.net(x)


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1, max_len=64):
        super().__init__()
        self.sa = MultiHeadAttention(d_model, h, dropout, max_len=max_len)
        self.ffwd = FeedForward(d_model, d_ff, dropout)
        self.ln1 = nn.LayerNorm(d_model)
        self.ln2 = nn.LayerNorm(d_model)

    def forward(self, x, src_pad):
        x = x + self.sa(self.ln1(x), key_pad=src_pad)
        x = x + self.ffwd(self.ln2(x))
        return x


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1, max_len=64):
        super().__init__()
        self.sa = MultiHeadAttention(d_model, h, dropout, causal=True, max_len=max_len)
        self.ca = MultiHeadAttention(d_model, h, dropout, max_len=max_len)
        self.ffwd = FeedForward(d_model, d_ff, dropout)
        self.ln1 = nn.LayerNorm(d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.ln3 = nn.LayerNorm(d_model)

    def forward(self, x, memory, src_pad):
        x = x + self.sa(self.ln1(x))
        x = x + self.ca(self.ln2(x), memory, key_pad=src_pad)
        x = x + self.ffwd(self.ln3(x))
        return x


class MiniTransformer(nn.Module):
    def __init__(self, vocab=VOCAB, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        super().__init__()
        self.d_model = d_model
        self.src_tok = nn.Embedding(vocab, d_model)
        self.tgt_tok = nn.Embedding(vocab, d_model)
        pos = torch.arange(max_len).float()[:, None]
        i = torch.arange(0, d_model, 2).float()
        angle = pos / 10000 ** (i / d_model)
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(angle)
        pe[:, 1::2] = torch.cos(angle)
        self.register_buffer('pe', pe)
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.ModuleList([EncoderLayer(d_model, h, d_ff, dropout, max_len) for _ in range(num_layers)])
        self.decoder = nn.ModuleList([DecoderLayer(d_model, h, d_ff, dropout, max_len) for _ in range(num_layers)])
        self.ln_enc = nn.LayerNorm(d_model)
        self.ln_dec = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab)

    def embed(self, tokens, table):
        T = tokens.shape[1]
        return self.drop(table(tokens) + self.pe[:T])

    def encode(self, src):
        src_pad = src == PAD
        x = self.embed(src, self.src_tok)
        for layer in self.encoder:
            x = layer(x, src_pad)
        return self.ln_enc(x), src_pad

    def decode(self, tgt, memory, src_pad):
        x = self.embed(tgt, self.tgt_tok)
        for layer in self.decoder:
            x = layer(x, memory, src_pad)
        return self.lm_head(self.ln_dec(x))

    def forward(self, src, tgt):
        memory, src_pad = self.encode(src)
        logits = self.decode(tgt, memory, src_pad)
        return logits, [layer.ca.attention_map() for layer in self.decoder]


@torch.no_grad()
def estimate_loss(model, batches=4, batch_size=64):
    model.eval()
    total = 0.0
    for _ in range(batches):
        src, tgt = make_batch(batch_size)
        logits, _ = model(src, tgt[:, :-1])
        total += F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1), ignore_index=PAD).item()
    model.train()
    return total / batches


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    for step in range(steps):
        # linear warm-up by hand
        for g in optimizer.param_groups:
            g['lr'] = lr * min(1.0, (step + 1) / warmup)
        src, tgt = make_batch(batch_size, device=device)
        logits, _ = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1), ignore_index=PAD)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if log_every and step % log_every == 0:
            print(f"step {step}: train loss {loss.item():.4f}")
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    memory, src_pad = model.encode(src)
    out = torch.full((src.shape[0], 1), SOS, dtype=torch.long, device=src.device)
    for _ in range(max_len - 1):
        logits = model.decode(out, memory, src_pad)
        nxt = logits[:, -1, :].argmax(dim=-1, keepdim=True)
        out = torch.cat([out, nxt], dim=1)
        if (nxt == EOS).all():
            break
    return out, [layer.ca.attention_map() for layer in model.decoder]
