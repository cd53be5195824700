"""The encoder-decoder of the lesson "Implementing a Mini Transformer from Scratch".

It learns to reverse a sequence of digits. This file is the reference every
diagnosis is measured against: the names, signatures and numbers are the
lesson's (235,981 parameters at the defaults; first logged loss 3.3463 with
torch.manual_seed(0)). Mutants in mutants/ are described edits of this text,
so change it only with care: every mutant's `old` text must still match once.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, SOS, EOS = 10, 11, 12
VOCAB = 13


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    """Returns (src, tgt). tgt is SOS + reversed(src) + EOS, all padded."""
    lens = torch.randint(min_len, max_len + 1, (batch_size,))
    T_src = int(lens.max())
    T_tgt = T_src + 2                      # room for SOS and EOS
    src = torch.full((batch_size, T_src), PAD, dtype=torch.long)  # (B, T_src)
    tgt = torch.full((batch_size, T_tgt), PAD, dtype=torch.long)  # (B, T_src + 2)
    for i, L in enumerate(lens):
        seq = torch.randint(0, 10, (L,))
        src[i, :L] = seq
        tgt[i, 0] = SOS
        tgt[i, 1:L + 1] = seq.flip(0)      # the reversal
        tgt[i, L + 1] = EOS
    return src.to(device), tgt.to(device)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        pe = torch.zeros(max_len, d_model)                         # (max_len, d)
        pos = torch.arange(max_len).unsqueeze(1).float()           # (max_len, 1)
        div = torch.exp(torch.arange(0, d_model, 2).float()
                        * (-math.log(10000.0) / d_model))          # (d/2,)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        # a buffer, not a Parameter: saved and moved by .to(), never trained
        self.register_buffer('pe', pe.unsqueeze(0))                # (1, max_len, d)

    def forward(self, x):
        return self.dropout(x + self.pe[:, :x.size(1)])            # (B, T, d)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        assert d_model % num_heads == 0
        self.d_model, self.h = d_model, num_heads
        self.d_k = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def _split(self, x):
        B, T, _ = x.shape
        return x.view(B, T, self.h, self.d_k).transpose(1, 2)     # (B, h, T, d_k)

    def forward(self, q, k, v, mask=None):
        B, T_q, _ = q.shape
        Q, K, V = self._split(self.W_q(q)), self._split(self.W_k(k)), self._split(self.W_v(v))
        scores = Q @ K.transpose(-2, -1) / math.sqrt(self.d_k)     # (B, h, T_q, T_k)
        if mask is not None:
            # -1e9, not -inf: a fully masked row becomes uniform instead of 0/0 = NaN
            scores = scores.masked_fill(~mask, -1e9)
        attn = self.dropout(torch.softmax(scores, dim=-1))         # normalise over keys
        out = (attn @ V).transpose(1, 2).contiguous().view(B, T_q, self.d_model)  # (B, T_q, d)
        return self.W_o(out), attn


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_model, d_ff), nn.ReLU(),
            nn.Dropout(dropout), nn.Linear(d_ff, d_model))

    def forward(self, x):
        return self.net(x)                                         # (B, T, d)


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.n1, self.n2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        a, _ = self.attn(x, x, x, mask)          # self-attention: q = k = v = x
        x = self.n1(x + self.drop(a))            # residual, then normalise
        x = self.n2(x + self.drop(self.ff(x)))
        return x                                 # (B, T_src, d)


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.cross_attn = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.n1 = nn.LayerNorm(d_model)
        self.n2 = nn.LayerNorm(d_model)
        self.n3 = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        a, _ = self.self_attn(x, x, x, tgt_mask)
        x = self.n1(x + self.drop(a))
        # Q from the decoder, K and V from the encoder output
        c, cross = self.cross_attn(x, memory, memory, src_mask)   # cross: (B, h, T_tgt, T_src)
        x = self.n2(x + self.drop(c))
        x = self.n3(x + self.drop(self.ff(x)))
        return x, cross


def padding_mask(x, pad=PAD):
    """(B, T) -> (B, 1, 1, T); True where the token is real."""
    return (x != pad).unsqueeze(1).unsqueeze(2)


def target_mask(x, pad=PAD):
    """(B, T) -> (B, 1, T, T); padding AND causal."""
    B, T = x.shape
    pad_m = (x != pad).unsqueeze(1).unsqueeze(2)                       # (B,1,1,T)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool,
                                   device=x.device))[None, None]       # (1,1,T,T)
    return pad_m & causal


class MiniTransformer(nn.Module):
    def __init__(self, vocab=VOCAB, d_model=64, h=4, d_ff=256,
                 num_layers=2, dropout=0.1, max_len=64):
        super().__init__()
        self.d_model = d_model
        self.src_emb = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.tgt_emb = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.pos = PositionalEncoding(d_model, max_len, dropout)
        self.enc = nn.ModuleList(EncoderLayer(d_model, h, d_ff, dropout)
                                 for _ in range(num_layers))
        self.dec = nn.ModuleList(DecoderLayer(d_model, h, d_ff, dropout)
                                 for _ in range(num_layers))
        self.generator = nn.Linear(d_model, vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src, src_mask):
        # * sqrt(d_model) brings token embeddings (std ~0.17) to the scale of the PE ([-1, 1])
        x = self.pos(self.src_emb(src) * math.sqrt(self.d_model))  # (B, T_src, d)
        for layer in self.enc:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, tgt_mask, src_mask):
        x = self.pos(self.tgt_emb(tgt) * math.sqrt(self.d_model))  # (B, T_tgt, d)
        maps = []
        for layer in self.dec:
            x, cross = layer(x, memory, tgt_mask, src_mask)
            maps.append(cross)
        return x, maps

    def forward(self, src, tgt):
        src_mask = padding_mask(src)
        tgt_mask = target_mask(tgt)
        memory = self.encode(src, src_mask)
        out, maps = self.decode(tgt, memory, tgt_mask, src_mask)
        return self.generator(out), maps                           # (B, T_tgt, V)


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu',
          warmup=400, log_every=200):
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warmup, 1.0))     # linear warmup, then flat
    for step in range(1, steps + 1):
        src, tgt = make_batch(batch_size, device=device)
        tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]      # SHIFT RIGHT
        logits, _ = model(src, tgt_in)
        loss = F.cross_entropy(
            logits.reshape(-1, VOCAB), tgt_out.reshape(-1),
            ignore_index=PAD)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % log_every == 0 or step == 1:
            print(f"step {step:5d}  loss {loss.item():.4f}  "
                  f"grad_norm {gnorm:.2f}  lr {sched.get_last_lr()[0]:.2e}")
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    src_mask = padding_mask(src)
    memory = model.encode(src, src_mask)               # encoder runs ONCE
    ys = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)
    for _ in range(max_len - 1):
        out, maps = model.decode(ys, memory, target_mask(ys), src_mask)
        next_tok = model.generator(out[:, -1]).argmax(-1, keepdim=True)  # (B, 1)
        ys = torch.cat([ys, next_tok], dim=1)
        if (next_tok == EOS).all():
            break
    return ys, maps
