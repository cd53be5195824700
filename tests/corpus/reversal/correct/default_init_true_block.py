# CS-style homework: Transformer that reverses digit strings.
# Conventions used throughout this file:
#   * a mask is True where attention is NOT allowed (like PyTorch's key_padding_mask)
#   * no custom initialisation: PyTorch's default init for every layer
#   * one Linear(d, 3d) for q/k/v, einsum for the attention products

import math
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD = 10; SOS = 11; EOS = 12; VOCAB = 13


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    srcs, tgts = [], []
    for _ in range(batch_size):
        n = int(torch.randint(min_len, max_len + 1, ()).item())
        d = torch.randint(0, 10, (n,))
        srcs.append(d)
        tgts.append(torch.cat([torch.tensor([SOS]), d.flip(0), torch.tensor([EOS])]))
    src = nn.utils.rnn.pad_sequence(srcs, batch_first=True, padding_value=PAD)
    tgt = nn.utils.rnn.pad_sequence(tgts, batch_first=True, padding_value=PAD)
    return src.to(device), tgt.to(device)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        p = torch.arange(max_len, dtype=torch.float32)[:, None]
        w = 1.0 / (10000 ** (torch.arange(0, d_model, 2, dtype=torch.float32) / d_model))
        pe = torch.empty(max_len, d_model)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(p * w), torch.cos(p * w)
        self.register_buffer('pe', pe)

    def forward(self, x):
        return self.dropout(x + self.pe[None, :x.shape[1]])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.nh = num_heads
        self.to_qkv = nn.Linear(d_model, 3 * d_model)
        self.to_out = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, q, k, v, mask=None):
        d = q.shape[-1]
        wq, wk, wv = self.to_qkv.weight.split(d)
        bq, bk, bv = self.to_qkv.bias.split(d)
        def split(t, w, b):
            t = F.linear(t, w, b)
            return t.view(t.shape[0], t.shape[1], self.nh, -1)       # (B, T, h, dh)
        Q, K, V = split(q, wq, bq), split(k, wk, bk), split(v, wv, bv)
        logits = torch.einsum('bihd,bjhd->bhij', Q, K) / math.sqrt(Q.shape[-1])
        if mask is not None:
            logits = logits.masked_fill(mask, -1e9)                    # True = blocked
        w = torch.softmax(logits, dim=-1)
        out = torch.einsum('bhij,bjhd->bihd', self.drop(w), V).reshape(q.shape[0], q.shape[1], d)
        return self.to_out(out), w


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.a = nn.Linear(d_model, d_ff)
        self.b = nn.Linear(d_ff, d_model)
        self.p = dropout

    def forward(self, x):
        return self.b(F.dropout(F.relu(self.a(x)), self.p, self.training))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, h, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.ln = nn.ModuleList([nn.LayerNorm(d_model), nn.LayerNorm(d_model)])
        self.p = dropout

    def forward(self, x, mask=None):
        x = self.ln[0](x + F.dropout(self.attn(x, x, x, mask)[0], self.p, self.training))
        x = self.ln[1](x + F.dropout(self.ffn(x), self.p, self.training))
        return x


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, h, dropout)
        self.cross = MultiHeadAttention(d_model, h, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.ln = nn.ModuleList([nn.LayerNorm(d_model) for _ in range(3)])
        self.p = dropout

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        x = self.ln[0](x + F.dropout(self.attn(x, x, x, tgt_mask)[0], self.p, self.training))
        c, weights = self.cross(x, memory, memory, src_mask)
        x = self.ln[1](x + F.dropout(c, self.p, self.training))
        x = self.ln[2](x + F.dropout(self.ffn(x), self.p, self.training))
        return x, weights


def padding_mask(x, pad=PAD):
    return (x == pad)[:, None, None, :]                     # (B,1,1,T), True at padding


def target_mask(x, pad=PAD):
    T = x.shape[1]
    ahead = torch.ones(T, T, device=x.device).triu(1).bool()   # True above the diagonal
    return padding_mask(x, pad) | ahead


class MiniTransformer(nn.Module):
    def __init__(self, vocab=13, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        super().__init__()
        self.d_model = d_model
        self.emb_in = nn.Embedding(vocab, d_model)
        self.emb_out = nn.Embedding(vocab, d_model)
        self.pos = PositionalEncoding(d_model, max_len, dropout)
        self.encoder_stack = nn.ModuleList([EncoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.decoder_stack = nn.ModuleList([DecoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.generator = nn.Linear(d_model, vocab)

    def encode(self, src, src_mask):
        h = self.pos(self.emb_in(src))        # nn.Embedding's default N(0,1) is already on the PE's scale
        for blk in self.encoder_stack:
            h = blk(h, src_mask)
        return h

    def decode(self, tgt, memory, tgt_mask, src_mask):
        h = self.pos(self.emb_out(tgt))
        cross_maps = []
        for blk in self.decoder_stack:
            h, cm = blk(h, memory, tgt_mask, src_mask)
            cross_maps.append(cm)
        return h, cross_maps

    def forward(self, src, tgt_in):
        src_mask = padding_mask(src)
        mem = self.encode(src, src_mask)
        h, cross_maps = self.decode(tgt_in, mem, target_mask(tgt_in), src_mask)
        return self.generator(h), cross_maps


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model = model.to(device)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: min(1.0, (i + 1) / warmup))
    loss_fn = nn.CrossEntropyLoss(ignore_index=PAD)
    running = 0.0
    for i in range(steps):
        src, tgt = make_batch(batch_size, device=device)
        logits, _ = model(src, tgt[:, :-1])
        loss = loss_fn(logits.permute(0, 2, 1), tgt[:, 1:])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        running += loss.item()
        if (i + 1) % log_every == 0:
            print('step', i + 1, 'avg loss', running / log_every)
            running = 0.0
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    src_mask = padding_mask(src)
    memory = model.encode(src, src_mask)
    ys = torch.full((len(src), 1), SOS, device=src.device)
    for t in range(max_len - 1):
        h, maps = model.decode(ys, memory, target_mask(ys), src_mask)
        nxt = model.generator(h[:, -1]).argmax(dim=-1)
        ys = torch.cat([ys, nxt[:, None]], dim=-1)
        if (nxt == EOS).all():
            break
    return ys, maps


if __name__ == '__main__':
    torch.manual_seed(42)
    model = train(MiniTransformer(), steps=2000)
    s, t = make_batch(4)
    print(greedy_decode(model, s)[0], t, sep='\n')
