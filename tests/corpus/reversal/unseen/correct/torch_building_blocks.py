"""Mini transformer for digit reversal, assembled from torch.nn building blocks.

I didn't want to hand-roll everything, so the encoder layer is nn.TransformerEncoderLayer
and attention goes through nn.MultiheadAttention. The wrappers just adapt the
assignment's mask convention (True = token is visible) to PyTorch's (True = blocked).
"""
import math

import torch
from torch import nn
from torch.nn import functional as F

PAD = 10
SOS = 11
EOS = 12
VOCAB = 13


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    lens = torch.randint(min_len, max_len + 1, (batch_size,))
    T = int(lens.max())
    src = torch.full((batch_size, T), PAD, dtype=torch.long)
    tgt = torch.full((batch_size, T + 2), PAD, dtype=torch.long)
    for b in range(batch_size):
        n = int(lens[b])
        digits = torch.randint(0, 10, (n,))
        src[b, :n] = digits
        tgt[b, 0] = SOS
        tgt[b, 1:n + 1] = torch.flip(digits, dims=[0])
        tgt[b, n + 1] = EOS
    return src.to(device), tgt.to(device)


def padding_mask(x, pad=PAD):
    # (B, T) -> (B, 1, 1, T), True where there is a real token
    return (x != pad).unsqueeze(1).unsqueeze(1)


def target_mask(x, pad=PAD):
    T = x.size(1)
    causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
    return padding_mask(x, pad) & causal.view(1, 1, T, T)


def _to_torch_mask(mask, batch, heads, t_q, t_k):
    """assignment mask (B|1, 1, Tq|1, Tk), True=visible -> float mask (B*heads, Tq, Tk)."""
    if mask is None:
        return None
    visible = mask.expand(batch, heads, t_q, t_k).reshape(batch * heads, t_q, t_k)
    blocked = torch.zeros(visible.shape, device=visible.device)
    return blocked.masked_fill(~visible, -1e9)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(1, max_len, d_model)
        pe[0, :, 0::2] = torch.sin(position * div_term)
        pe[0, :, 1::2] = torch.cos(position * div_term)
        self.register_buffer('pe', pe)

    def forward(self, x):
        x = x + self.pe[:, :x.size(1), :]
        return self.dropout(x)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.num_heads = num_heads
        self.mha = nn.MultiheadAttention(d_model, num_heads, dropout=dropout, batch_first=True)

    def forward(self, q, k, v, mask=None):
        B, Tq, _ = q.shape
        Tk = k.size(1)
        attn_mask = _to_torch_mask(mask, B, self.num_heads, Tq, Tk)
        out, weights = self.mha(q, k, v, attn_mask=attn_mask, need_weights=True,
                                average_attn_weights=False)
        return out, weights


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.lin1 = nn.Linear(d_model, d_ff)
        self.lin2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.lin2(self.dropout(F.relu(self.lin1(x))))


class EncoderLayer(nn.Module):
    """Thin wrapper: nn.TransformerEncoderLayer with a key-padding mask."""

    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model, h, dim_feedforward=d_ff, dropout=dropout,
                                                batch_first=True)

    def forward(self, x, mask=None):
        key_padding = None
        if mask is not None:
            # (B, 1, 1, T) visible -> (B, T) blocked
            key_padding = ~mask.reshape(mask.size(0), -1)[:, -x.size(1):]
        return self.layer(x, src_key_padding_mask=key_padding)


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.cross_attn = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        sa, _ = self.self_attn(x, x, x, tgt_mask)
        x = self.norm1(x + self.dropout1(sa))
        ca, cross = self.cross_attn(x, memory, memory, src_mask)
        x = self.norm2(x + self.dropout2(ca))
        x = self.norm3(x + self.dropout3(self.ff(x)))
        return x, cross


class MiniTransformer(nn.Module):
    def __init__(self, vocab=VOCAB, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1,
                 max_len=64):
        super().__init__()
        self.d_model = d_model
        self.src_embed = nn.Embedding(vocab, d_model)
        self.tgt_embed = nn.Embedding(vocab, d_model)
        self.pos_enc = PositionalEncoding(d_model, max_len, dropout)
        self.enc_layers = nn.ModuleList([EncoderLayer(d_model, h, d_ff, dropout)
                                         for _ in range(num_layers)])
        self.dec_layers = nn.ModuleList([DecoderLayer(d_model, h, d_ff, dropout)
                                         for _ in range(num_layers)])
        self.generator = nn.Linear(d_model, vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src, src_mask):
        h = self.pos_enc(self.src_embed(src) * math.sqrt(self.d_model))
        for layer in self.enc_layers:
            h = layer(h, src_mask)
        return h

    def decode(self, tgt, memory, tgt_mask, src_mask):
        h = self.pos_enc(self.tgt_embed(tgt) * math.sqrt(self.d_model))
        maps = []
        for layer in self.dec_layers:
            h, cross = layer(h, memory, tgt_mask, src_mask)
            maps.append(cross)
        return h, maps

    def forward(self, src, tgt_in):
        src_mask = padding_mask(src)
        memory = self.encode(src, src_mask)
        h, maps = self.decode(tgt_in, memory, target_mask(tgt_in), src_mask)
        return self.generator(h), maps


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model = model.to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9,
                                  weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / warmup, 1.0))
    criterion = nn.CrossEntropyLoss(ignore_index=PAD)
    for step in range(1, steps + 1):
        src, tgt = make_batch(batch_size, device=device)
        decoder_input = tgt[:, :-1]
        labels = tgt[:, 1:]
        logits, _ = model(src, decoder_input)
        loss = criterion(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        scheduler.step()
        if step % log_every == 0 or step == 1:
            print('step', step, 'loss', round(loss.item(), 4))
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    src_mask = padding_mask(src)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)
    maps = None
    for _ in range(max_len - 1):
        h, maps = model.decode(ys, memory, target_mask(ys), src_mask)
        next_token = model.generator(h[:, -1, :]).argmax(dim=-1)
        ys = torch.cat([ys, next_token.unsqueeze(1)], dim=1)
        if (next_token == EOS).all():
            break
    return ys, maps
