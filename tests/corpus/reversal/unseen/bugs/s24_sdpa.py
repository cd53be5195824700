"""Reversal transformer on F.scaled_dot_product_attention (flash/mem-efficient path).

The fused kernel never materialises the attention matrix, so MultiHeadAttention
returns None for the weights, and the model's cross-attention maps are None too.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, SOS, EOS = 10, 11, 12
VOCAB = 13


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    g_lens = torch.randint(min_len, max_len + 1, (batch_size,))
    T = int(g_lens.max())
    src = torch.full((batch_size, T), PAD, dtype=torch.long)
    tgt = torch.full((batch_size, T + 2), PAD, dtype=torch.long)
    for b in range(batch_size):
        L = int(g_lens[b])
        digits = torch.randint(0, 10, (L,))
        src[b, :L] = digits
        tgt[b, 0] = SOS
        tgt[b, 1:1 + L] = digits.flip(0)
        tgt[b, 1 + L] = EOS
    return src.to(device), tgt.to(device)


def padding_mask(x, pad=PAD):
    # SDPA boolean masks: True = this key takes part in attention
    return (x != pad)[:, None, None, :]


def target_mask(x, pad=PAD):
    T = x.shape[-1]
    causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril_()
    return padding_mask(x, pad) & causal


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        positions = torch.arange(max_len).float()
        freqs = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2).float() / d_model)
        args = torch.outer(positions, freqs)
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2], pe[:, 1::2] = args.sin(), args.cos()
        self.register_buffer('pe', pe, persistent=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(x + self.pe[: x.size(1)])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.n_head = num_heads
        self.p = dropout
        self.q_lin = nn.Linear(d_model, d_model)
        self.kv_lin = nn.Linear(d_model, 2 * d_model)
        self.out_lin = nn.Linear(d_model, d_model)

    def forward(self, q, k, v, mask=None):
        B, Tq, C = q.shape
        Tk = k.size(1)
        query = self.q_lin(q).view(B, Tq, self.n_head, C // self.n_head).transpose(1, 2)
        if k is v:
            key, value = self.kv_lin(k).chunk(2, dim=-1)
        else:
            w_k, w_v = self.kv_lin.weight.chunk(2, dim=0)
            b_k, b_v = self.kv_lin.bias.chunk(2, dim=0)
            key, value = F.linear(k, w_k, b_k), F.linear(v, w_v, b_v)
        key = key.view(B, Tk, self.n_head, C // self.n_head).transpose(1, 2)
        value = value.view(B, Tk, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(query, key, value, attn_mask=mask,
                                           dropout_p=self.p)
        y = y.transpose(1, 2).contiguous().view(B, Tq, C)
        return self.out_lin(y), None


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Dropout(dropout),
                                  nn.Linear(d_ff, d_model))

    def forward(self, x):
        return self.body(x)


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
        self.ln1, self.ln2, self.ln3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.drop = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        x = self.ln1(x + self.drop(self.attn(x, x, x, tgt_mask)[0]))
        c, weights = self.cross(x, memory, memory, src_mask)
        x = self.ln2(x + self.drop(c))
        return self.ln3(x + self.drop(self.ff(x))), weights


class MiniTransformer(nn.Module):
    def __init__(self, vocab=VOCAB, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1,
                 max_len=64):
        super().__init__()
        self.d_model = d_model
        self.src_emb = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.tgt_emb = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.pos = PositionalEncoding(d_model, max_len, dropout)
        self.enc = nn.ModuleList(EncoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers))
        self.dec = nn.ModuleList(DecoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers))
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
            x, w = layer(x, memory, tgt_mask, src_mask)
            maps.append(w)
        return x, maps

    def forward(self, src, tgt_in):
        sm = padding_mask(src)
        x, maps = self.decode(tgt_in, self.encode(src, sm), target_mask(tgt_in), sm)
        return self.generator(x), maps


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1.0 / warmup, end_factor=1.0,
                                              total_iters=warmup)
    for step in range(1, steps + 1):
        src, tgt = make_batch(batch_size, device=device)
        logits, _ = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=PAD)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % log_every == 0 or step == 1:
            print(f"step {step:>5}  loss {loss.item():.4f}")
    return model


@torch.inference_mode()
def greedy_decode(model, src, max_len=20):
    model.eval()
    sm = padding_mask(src)
    memory = model.encode(src, sm)
    ys = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)
    maps = []
    for _ in range(max_len - 1):
        x, maps = model.decode(ys, memory, target_mask(ys), sm)
        nxt = model.generator(x[:, -1]).argmax(-1, keepdim=True)
        ys = torch.cat([ys, nxt], dim=1)
        if (nxt == EOS).all():
            break
    return ys, maps
