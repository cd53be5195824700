"""
Reverse-a-sequence transformer (Annotated-Transformer flavoured).

* LabelSmoothing module: KL divergence against a smoothed target distribution
* Noam learning-rate schedule (inverse square root after warmup)
"""
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, SOS, EOS, VOCAB = 10, 11, 12, 13


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    lengths = [int(n) for n in torch.randint(min_len, max_len + 1, (batch_size,))]
    longest = max(lengths)
    src_rows, tgt_rows = [], []
    for n in lengths:
        digits = torch.randint(0, 10, (n,)).tolist()
        src_rows.append(digits + [PAD] * (longest - n))
        tgt_rows.append([SOS] + digits[::-1] + [EOS] + [PAD] * (longest - n))
    return torch.tensor(src_rows, device=device), torch.tensor(tgt_rows, device=device)


def clones(module, n):
    return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[:, : x.size(1)].requires_grad_(False)
        return self.dropout(x)


def attention(query, key, value, mask=None, dropout=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        assert d_model % num_heads == 0
        self.d_k = d_model // num_heads
        self.h = num_heads
        self.linears = clones(nn.Linear(d_model, d_model), 4)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        nbatches = query.size(0)
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            for lin, x in zip(self.linears, (query, key, value))
        ]
        x, attn = attention(query, key, value, mask=mask, dropout=self.dropout)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        return self.linears[-1](x), attn


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.w_2(self.dropout(self.w_1(x).relu()))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norm = clones(nn.LayerNorm(d_model), 2)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        x = self.norm[0](x + self.dropout(self.self_attn(x, x, x, mask)[0]))
        return self.norm[1](x + self.dropout(self.feed_forward(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.src_attn = MultiHeadAttention(d_model, h, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norm = clones(nn.LayerNorm(d_model), 3)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        m = memory
        x = self.norm[0](x + self.dropout(self.self_attn(x, x, x, tgt_mask)[0]))
        y, cross = self.src_attn(x, m, m, src_mask)
        x = self.norm[1](x + self.dropout(y))
        return self.norm[2](x + self.dropout(self.feed_forward(x))), cross


def subsequent_mask(size):
    attn_shape = (1, size, size)
    mask = torch.triu(torch.ones(attn_shape), diagonal=1).type(torch.uint8)
    return mask == 0


def padding_mask(x, pad=PAD):
    return (x != pad).unsqueeze(-2).unsqueeze(1)          # (B, 1, 1, T)


def target_mask(x, pad=PAD):
    tgt_mask = (x != pad).unsqueeze(-2)                    # (B, 1, T)
    tgt_mask = tgt_mask & subsequent_mask(x.size(-1)).type_as(tgt_mask.data).to(x.device)
    return tgt_mask.unsqueeze(1)                           # (B, 1, T, T)


class MiniTransformer(nn.Module):
    def __init__(self, vocab=13, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        super().__init__()
        self.d_model = d_model
        self.src_embed = nn.Embedding(vocab, d_model)
        self.tgt_embed = nn.Embedding(vocab, d_model)
        self.position = PositionalEncoding(d_model, max_len, dropout)
        self.encoder_layers = clones(EncoderLayer(d_model, h, d_ff, dropout), num_layers)
        self.decoder_layers = clones(DecoderLayer(d_model, h, d_ff, dropout), num_layers)
        self.generator = nn.Linear(d_model, vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src, src_mask):
        x = self.position(self.src_embed(src) * math.sqrt(self.d_model))
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, tgt_mask, src_mask):
        x = self.position(self.tgt_embed(tgt) * math.sqrt(self.d_model))
        maps = []
        for layer in self.decoder_layers:
            x, cross = layer(x, memory, tgt_mask, src_mask)
            maps.append(cross)
        return x, maps

    def forward(self, src, tgt_in):
        src_mask = padding_mask(src)
        memory = self.encode(src, src_mask)
        out, maps = self.decode(tgt_in, memory, target_mask(tgt_in), src_mask)
        return self.generator(out), maps


class LabelSmoothing(nn.Module):
    """KL(smoothed one-hot || model) with PAD never predicted and PAD rows ignored."""

    def __init__(self, size, padding_idx, smoothing=0.1):
        super().__init__()
        self.criterion = nn.KLDivLoss(reduction="sum")
        self.padding_idx = padding_idx
        self.confidence = 1.0 - smoothing
        self.smoothing = smoothing
        self.size = size

    def forward(self, x, target):
        true_dist = torch.full_like(x, self.smoothing / (self.size - 2))
        true_dist.scatter_(1, target.unsqueeze(1), self.confidence)
        true_dist[:, self.padding_idx] = 0
        rows = torch.nonzero(target == self.padding_idx)
        if rows.numel() > 0:
            true_dist.index_fill_(0, rows.squeeze(1), 0.0)
        n_tokens = (target != self.padding_idx).sum().clamp(min=1)
        return self.criterion(x, true_dist.detach()) / n_tokens


def rate(step, model_size, factor, warmup):
    if step == 0:
        step = 1
    return factor * (model_size ** (-0.5) * min(step ** (-0.5), step * warmup ** (-1.5)))


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device).train()
    criterion = LabelSmoothing(VOCAB, PAD, smoothing=0.1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    # peak of the Noam curve (at step == warmup) equals lr
    factor = lr / rate(warmup, model.d_model, 1.0, warmup)
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lr_lambda=lambda step: rate(step + 1, model.d_model, factor, warmup))
    for step in range(steps):
        src, tgt = make_batch(batch_size, device=device)
        out, _ = model(src, tgt[:, :-1])
        log_probs = F.log_softmax(out, dim=-1)
        loss = criterion(log_probs.contiguous().view(-1, VOCAB), tgt[:, 1:].contiguous().view(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % log_every == 1:
            print("Epoch Step: %6d | Loss: %6.2f | LR: %6.1e" % (step, loss.item(), optimizer.param_groups[0]["lr"]))
    return model


def greedy_decode(model, src, max_len=20):
    model.eval()
    with torch.no_grad():
        src_mask = padding_mask(src)
        memory = model.encode(src, src_mask)
        ys = torch.zeros(src.size(0), 1).fill_(SOS).type_as(src.data)
        for i in range(max_len - 1):
            out, maps = model.decode(ys, memory, target_mask(ys), src_mask)
            prob = model.generator(out[:, -1])
            next_word = torch.argmax(prob, dim=1)
            ys = torch.cat([ys, next_word.unsqueeze(1).type_as(src.data)], dim=1)
    return ys, maps
