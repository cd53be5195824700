# reversal.py -- encoder/decoder transformer, GPT-2 style details:
#   learned positional embeddings (nn.Embedding over positions),
#   N(0, 0.02) init for every Linear/Embedding, residual projections scaled
#   by 1/sqrt(2 * n_layer), AdamW with weight decay and a warmup lambda.
import math

import torch
import torch.nn as nn
from torch.nn import functional as F

PAD, SOS, EOS = 10, 11, 12
VOCAB = 13


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    n = torch.randint(min_len, max_len + 1, (batch_size,))
    digits = torch.randint(0, 10, (batch_size, int(n.max())))
    idx = torch.arange(int(n.max()))[None, :]                          # (1, T)
    real = idx < n[:, None]                                            # (B, T)
    src = torch.where(real, digits, torch.full_like(digits, PAD))
    # reversed copy: position j of the output takes digit n-1-j
    rev_idx = (n[:, None] - 1 - idx).clamp(min=0)
    rev = torch.gather(digits, 1, rev_idx)
    rev = torch.where(real, rev, torch.full_like(rev, PAD))
    tgt = torch.full((batch_size, int(n.max()) + 2), PAD, dtype=torch.long)
    tgt[:, 0] = SOS
    tgt[:, 1:-1] = rev
    tgt[torch.arange(batch_size), n + 1] = EOS
    return src.to(device), tgt.to(device)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.n_head = num_heads
        self.c_q = nn.Linear(d_model, d_model)
        self.c_kv = nn.Linear(d_model, 2 * d_model)
        self.c_proj = nn.Linear(d_model, d_model)
        self.c_proj.RESIDUAL_SCALE = True
        self.attn_dropout = nn.Dropout(dropout)

    def forward(self, q, k, v, mask=None):
        B, T, C = q.size()
        S = k.size(1)
        hs = C // self.n_head
        q = self.c_q(q).view(B, T, self.n_head, hs).transpose(1, 2)          # (B, nh, T, hs)
        kk, _ = self.c_kv(k).split(C, dim=2)
        _, vv = self.c_kv(v).split(C, dim=2)
        kk = kk.view(B, S, self.n_head, hs).transpose(1, 2)
        vv = vv.view(B, S, self.n_head, hs).transpose(1, 2)
        att = (q @ kk.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        if mask is not None:
            att = att.masked_fill(mask == 0, float('-1e9'))
        att = F.softmax(att, dim=-1)
        y = self.attn_dropout(att) @ vv
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y), att


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.c_fc = nn.Linear(d_model, d_ff)
        self.gelu = nn.GELU(approximate='tanh')
        self.c_proj = nn.Linear(d_ff, d_model)
        self.c_proj.RESIDUAL_SCALE = True
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, h, dropout)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = FeedForward(d_model, d_ff, dropout)

    def forward(self, x, mask=None):
        a = self.ln_1(x)
        x = x + self.attn(a, a, a, mask)[0]
        x = x + self.mlp(self.ln_2(x))
        return x


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, h, dropout)
        self.ln_2 = nn.LayerNorm(d_model)
        self.xattn = MultiHeadAttention(d_model, h, dropout)
        self.ln_3 = nn.LayerNorm(d_model)
        self.mlp = FeedForward(d_model, d_ff, dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        a = self.ln_1(x)
        x = x + self.attn(a, a, a, tgt_mask)[0]
        c, w = self.xattn(self.ln_2(x), memory, memory, src_mask)
        x = x + c
        x = x + self.mlp(self.ln_3(x))
        return x, w


def padding_mask(x, pad=PAD):
    return (x != pad)[:, None, None, :]


def target_mask(x, pad=PAD):
    T = x.size(1)
    return padding_mask(x, pad) & torch.tril(torch.ones(T, T, device=x.device)).view(1, 1, T, T).bool()


class MiniTransformer(nn.Module):
    def __init__(self, vocab=13, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        super().__init__()
        self.n_layer = num_layers
        self.wte_src = nn.Embedding(vocab, d_model)
        self.wte_tgt = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(max_len, d_model)            # learned positions, shared enc/dec
        self.drop = nn.Dropout(dropout)
        self.enc = nn.ModuleList([EncoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.dec = nn.ModuleList([DecoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.ln_enc = nn.LayerNorm(d_model)
        self.ln_f = nn.LayerNorm(d_model)
        self.generator = nn.Linear(d_model, vocab, bias=False)
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            std = 0.02
            if getattr(module, 'RESIDUAL_SCALE', False):
                std *= (2 * self.n_layer) ** -0.5
            torch.nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def _embed(self, table, idx):
        pos = torch.arange(idx.size(1), device=idx.device)
        return self.drop(table(idx) + self.wpe(pos))

    def encode(self, src, src_mask):
        x = self._embed(self.wte_src, src)
        for block in self.enc:
            x = block(x, src_mask)
        return self.ln_enc(x)

    def decode(self, tgt, memory, tgt_mask, src_mask):
        x = self._embed(self.wte_tgt, tgt)
        maps = []
        for block in self.dec:
            x, w = block(x, memory, tgt_mask, src_mask)
            maps.append(w)
        return self.ln_f(x), maps

    def forward(self, src, tgt_in):
        src_mask = padding_mask(src)
        memory = self.encode(src, src_mask)
        x, maps = self.decode(tgt_in, memory, target_mask(tgt_in), src_mask)
        return self.generator(x), maps


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device)
    model.train()
    params = {pn: p for pn, p in model.named_parameters() if p.requires_grad}
    groups = [
        {'params': [p for p in params.values() if p.dim() >= 2], 'weight_decay': 0.1},
        {'params': [p for p in params.values() if p.dim() < 2], 'weight_decay': 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))
    get_lr = lambda it: min(1.0, (it + 1) / warmup)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, get_lr)
    for it in range(steps):
        xb, yb = make_batch(batch_size, device=device)
        logits, _ = model(xb, yb[:, :-1])
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), yb[:, 1:].reshape(-1), ignore_index=PAD)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        if it % log_every == 0:
            print(f"iter {it}: loss {loss.item():.4f}, norm {norm:.2f}")
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    src_mask = padding_mask(src)
    memory = model.encode(src, src_mask)
    idx = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)
    maps = []
    for _ in range(max_len - 1):
        x, maps = model.decode(idx, memory, target_mask(idx), src_mask)
        logits = model.generator(x)[:, 0, :]
        idx_next = torch.argmax(logits, dim=-1, keepdim=True)
        idx = torch.cat((idx, idx_next), dim=1)
        if (idx_next == EOS).all():
            break
    return idx, maps
