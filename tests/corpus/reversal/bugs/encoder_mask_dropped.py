# Mini Transformer (reversal) using nn.MultiheadAttention with its default
# sequence-first layout (T, B, D). My attention wrapper keeps the lesson's
# (B, T, D) interface and transposes inside. Masks are additive floats
# (0 = attend, -1e9 = blocked), built once per batch.

import math
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, SOS, EOS = 10, 11, 12
VOCAB = 13
NEG = -1e9


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    lens = torch.randint(min_len, max_len + 1, (batch_size,))
    T = lens.max().item()
    src = PAD * torch.ones(batch_size, T, dtype=torch.long)
    tgt = PAD * torch.ones(batch_size, T + 2, dtype=torch.long)
    for row, n in enumerate(lens.tolist()):
        seq = torch.randint(10, (n,))
        src[row, :n] = seq
        tgt[row, 0] = SOS
        tgt[row, 1:1 + n] = seq.flip(0)
        tgt[row, 1 + n] = EOS
    return src.to(device), tgt.to(device)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer('pe', pe)

    def forward(self, x):
        x = x + self.pe[:x.size(1)].unsqueeze(0)
        return self.dropout(x)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.num_heads = num_heads
        self.mha = nn.MultiheadAttention(d_model, num_heads, dropout=dropout)   # seq-first

    def forward(self, q, k, v, mask=None):
        # mask: additive float, broadcastable to (B, 1, Tq, Tk)
        bsz, tq, tk = q.shape[0], q.shape[1], k.shape[1]
        float_mask = None
        if mask is not None:
            float_mask = mask.expand(bsz, self.num_heads, tq, tk).reshape(bsz * self.num_heads, tq, tk)
        out, attn = self.mha(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                             attn_mask=float_mask, average_attn_weights=False)
        return out.transpose(0, 1), attn


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.lin1 = nn.Linear(d_model, d_ff)
        self.lin2 = nn.Linear(d_ff, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.lin2(self.drop(F.relu(self.lin1(x))))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.attention = MultiHeadAttention(d_model, h, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norms = nn.ModuleList([nn.LayerNorm(d_model) for _ in range(2)])
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        x = self.norms[0](x + self.drop(self.attention(x, x, x, mask)[0]))
        x = self.norms[1](x + self.drop(self.feed_forward(x)))
        return x


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.masked_attention = MultiHeadAttention(d_model, h, dropout)
        self.enc_dec_attention = MultiHeadAttention(d_model, h, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norms = nn.ModuleList([nn.LayerNorm(d_model) for _ in range(3)])
        self.drop = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        x = self.norms[0](x + self.drop(self.masked_attention(x, x, x, tgt_mask)[0]))
        context, cross = self.enc_dec_attention(x, memory, memory, src_mask)
        x = self.norms[1](x + self.drop(context))
        x = self.norms[2](x + self.drop(self.feed_forward(x)))
        return x, cross


def padding_mask(x, pad=PAD):
    m = torch.zeros(x.shape, dtype=torch.float, device=x.device)
    m = m.masked_fill(x == pad, NEG)
    return m[:, None, None, :]                     # (B, 1, 1, T) additive


def target_mask(x, pad=PAD):
    T = x.size(1)
    causal = torch.full((T, T), NEG, device=x.device).triu(1)   # 0 on/below diagonal
    return padding_mask(x, pad) + causal[None, None]


class MiniTransformer(nn.Module):
    def __init__(self, vocab=13, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        super().__init__()
        self.d_model = d_model
        self.embed_src = nn.Embedding(vocab, d_model)
        self.embed_tgt = nn.Embedding(vocab, d_model)
        self.positional = PositionalEncoding(d_model, max_len, dropout)
        self.encoder = nn.ModuleList([EncoderLayer(d_model, h, d_ff, dropout) for i in range(num_layers)])
        self.decoder = nn.ModuleList([DecoderLayer(d_model, h, d_ff, dropout) for i in range(num_layers)])
        self.generator = nn.Linear(d_model, vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src, src_mask):
        x = self.positional(self.embed_src(src) * math.sqrt(self.d_model))
        for enc in self.encoder:
            x = enc(x)
        return x

    def decode(self, tgt, memory, tgt_mask, src_mask):
        x = self.positional(self.embed_tgt(tgt) * math.sqrt(self.d_model))
        maps = []
        for dec in self.decoder:
            x, m = dec(x, memory, tgt_mask, src_mask)
            maps.append(m)
        return x, maps

    def forward(self, src, tgt_in):
        sm, tm = padding_mask(src), target_mask(tgt_in)
        return_maps = []
        memory = self.encode(src, sm)
        h, return_maps = self.decode(tgt_in, memory, tm, sm)
        return self.generator(h), return_maps


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup))
    for step in range(1, steps + 1):
        src, tgt = make_batch(batch_size, device=device)
        inp, out = tgt[:, :-1], tgt[:, 1:]
        logits, _ = model(src, inp)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), out.reshape(-1), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        if step % log_every == 0:
            print(step, loss.item())
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    sm = padding_mask(src)
    memory = model.encode(src, sm)
    ys = torch.ones(src.size(0), 1, dtype=torch.long, device=src.device) * SOS
    for i in range(max_len - 1):
        h, maps = model.decode(ys, memory, target_mask(ys), sm)
        prob = model.generator(h[:, -1])
        _, next_word = torch.max(prob, dim=1)
        ys = torch.cat([ys, next_word.unsqueeze(1)], dim=1)
        if torch.all(next_word == EOS):
            break
    return ys, maps


if __name__ == '__main__':
    model = MiniTransformer()
    train(model)
