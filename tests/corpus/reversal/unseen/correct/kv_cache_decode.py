"""Reversal transformer with incremental (KV-cached) greedy decoding.

During generation each decoder layer keeps the keys/values it has already
computed for earlier target positions, so every step only pushes ONE new token
through the decoder instead of re-running the whole prefix.
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
    for i in range(batch_size):
        L = int(lens[i])
        seq = torch.randint(0, 10, (L,))
        src[i, :L] = seq
        tgt[i, 0] = SOS
        tgt[i, 1:L + 1] = seq.flip(0)
        tgt[i, L + 1] = EOS
    return src.to(device), tgt.to(device)


def padding_mask(x, pad=PAD):
    return (x != pad).unsqueeze(1).unsqueeze(2)


def target_mask(x, pad=PAD):
    T = x.size(1)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
    return padding_mask(x, pad) & causal[None, None]


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        pe = torch.zeros(max_len, d_model)
        pos = torch.arange(max_len, dtype=torch.float).unsqueeze(1)
        div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer('pe', pe.unsqueeze(0))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, offset=0):
        # offset = number of positions already decoded (used by the cached decoder)
        return self.dropout(x + self.pe[:, offset:offset + x.size(1)])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.h = num_heads
        self.d_k = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def _split(self, x):
        B, T, _ = x.shape
        return x.view(B, T, self.h, self.d_k).transpose(1, 2)

    def forward(self, q, k, v, mask=None, cache=None):
        """cache: optional dict; new K/V are appended to cache['k'], cache['v']."""
        B, Tq, D = q.shape
        Q = self._split(self.W_q(q))
        K = self._split(self.W_k(k))
        V = self._split(self.W_v(v))
        if cache is not None:
            if 'k' in cache:
                K = torch.cat([cache['k'], K], dim=2)
                V = torch.cat([cache['v'], V], dim=2)
            cache['k'], cache['v'] = K, V
        scores = Q @ K.transpose(-2, -1) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, -1e9)
        attn = torch.softmax(scores, dim=-1)
        out = (self.dropout(attn) @ V).transpose(1, 2).reshape(B, Tq, D)
        return self.W_o(out), attn


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.l1 = nn.Linear(d_model, d_ff)
        self.l2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.l2(self.dropout(F.relu(self.l1(x))))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.ln1 = nn.LayerNorm(d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        x = self.ln1(x + self.dropout(self.attn(x, x, x, mask)[0]))
        return self.ln2(x + self.dropout(self.ff(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.cross_attn = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.ln1 = nn.LayerNorm(d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.ln3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None, cache=None):
        a, _ = self.self_attn(x, x, x, tgt_mask, cache=cache)
        x = self.ln1(x + self.dropout(a))
        c, cross = self.cross_attn(x, memory, memory, src_mask)
        x = self.ln2(x + self.dropout(c))
        return self.ln3(x + self.dropout(self.ff(x))), cross


class MiniTransformer(nn.Module):
    def __init__(self, vocab=VOCAB, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1,
                 max_len=64):
        super().__init__()
        self.d_model = d_model
        self.src_emb = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.tgt_emb = nn.Embedding(vocab, d_model, padding_idx=PAD)
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

    def decode(self, tgt, memory, tgt_mask, src_mask, caches=None, offset=0):
        x = self.pos(self.tgt_emb(tgt) * math.sqrt(self.d_model), offset=offset)
        maps = []
        for i, layer in enumerate(self.dec):
            x, cross = layer(x, memory, tgt_mask, src_mask,
                             cache=None if caches is None else caches[i])
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
    for step in range(1, steps + 1):
        src, tgt = make_batch(batch_size, device=device)
        logits, _ = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1), ignore_index=PAD)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % log_every == 0 or step == 1:
            print(f"step {step} loss {loss.item():.4f}")
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    src_mask = padding_mask(src)
    memory = model.encode(src, src_mask)
    caches = [dict() for _ in model.dec]         # fresh cache for every call
    ys = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)
    step_maps = []
    for t in range(max_len - 1):
        # only the newest token goes in; earlier keys/values come from the cache.
        # It may attend to every cached position, so no causal mask is needed here.
        out, maps = model.decode(ys[:, -1:], memory, None, src_mask, caches=caches, offset=t)
        step_maps.append(maps)
        nxt = model.generator(out[:, -1]).argmax(-1, keepdim=True)
        ys = torch.cat([ys, nxt], dim=1)
        if (nxt == EOS).all():
            break
    # stitch the per-step cross-attention rows back into (B, h, T_tgt, T_src) per layer
    maps = [torch.cat([m[i] for m in step_maps], dim=2) for i in range(len(model.dec))]
    return ys, maps
