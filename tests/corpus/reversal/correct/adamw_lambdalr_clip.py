"""Mini transformer for digit reversal -- HW3.

AdamW + LambdaLR (linear warmup then cosine decay) + gradient clipping.
Fused qkv projection, post-norm layers.
"""
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
    for b in range(batch_size):
        n = int(lengths[b])
        digits = torch.randint(0, 10, (n,))
        src[b, :n] = digits
        tgt[b, 0] = SOS
        tgt[b, 1:n + 1] = torch.flip(digits, dims=[0])
        tgt[b, n + 1] = EOS
    return src.to(device), tgt.to(device)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        position = torch.arange(max_len, dtype=torch.float).unsqueeze(1)
        freqs = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float) / d_model)
        table = torch.zeros(max_len, d_model)
        table[:, 0::2] = torch.sin(position * freqs)
        table[:, 1::2] = torch.cos(position * freqs)
        self.register_buffer("table", table, persistent=False)

    def forward(self, x):
        T = x.shape[1]
        return self.drop(x + self.table[:T].unsqueeze(0))


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.h = num_heads
        self.dk = d_model // num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.attn_drop = nn.Dropout(dropout)

    def forward(self, q, k, v, mask=None):
        B, Tq, D = q.shape
        Tk = k.shape[1]
        Wq, Wk, Wv = self.qkv.weight.chunk(3, dim=0)
        bq, bk, bv = self.qkv.bias.chunk(3, dim=0)
        Q = F.linear(q, Wq, bq).reshape(B, Tq, self.h, self.dk).permute(0, 2, 1, 3)
        K = F.linear(k, Wk, bk).reshape(B, Tk, self.h, self.dk).permute(0, 2, 1, 3)
        V = F.linear(v, Wv, bv).reshape(B, Tk, self.h, self.dk).permute(0, 2, 1, 3)
        att = torch.matmul(Q, K.transpose(-1, -2)) * (1.0 / math.sqrt(self.dk))
        if mask is not None:
            att = att.masked_fill(mask == 0, -1e9)
        att = att.softmax(dim=-1)
        y = torch.matmul(self.attn_drop(att), V)
        y = y.permute(0, 2, 1, 3).reshape(B, Tq, D)
        return self.proj(y), att


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.fc2(self.drop(F.gelu(self.fc1(x))))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.mha = MultiHeadAttention(d_model, h, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.ln1 = nn.LayerNorm(d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        x = self.ln1(x + self.drop(self.mha(x, x, x, mask)[0]))
        x = self.ln2(x + self.drop(self.ffn(x)))
        return x


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_mha = MultiHeadAttention(d_model, h, dropout)
        self.cross_mha = MultiHeadAttention(d_model, h, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.ln1 = nn.LayerNorm(d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.ln3 = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        x = self.ln1(x + self.drop(self.self_mha(x, x, x, tgt_mask)[0]))
        y, cross = self.cross_mha(x, memory, memory, src_mask)
        x = self.ln2(x + self.drop(y))
        x = self.ln3(x + self.drop(self.ffn(x)))
        return x, cross


def padding_mask(x, pad=PAD):
    return (x != pad)[:, None, None, :]


def target_mask(x, pad=PAD):
    T = x.size(1)
    causal = torch.ones(T, T, device=x.device).tril().bool()
    return padding_mask(x, pad) & causal


class MiniTransformer(nn.Module):
    def __init__(self, vocab=13, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        super().__init__()
        self.d_model = d_model
        self.src_emb = nn.Embedding(vocab, d_model)
        self.tgt_emb = nn.Embedding(vocab, d_model)
        self.pos = PositionalEncoding(d_model, max_len, dropout)
        self.encoder = nn.ModuleList([EncoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.decoder = nn.ModuleList([DecoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.generator = nn.Linear(d_model, vocab)
        for name, p in self.named_parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src, src_mask):
        h = self.pos(self.src_emb(src) * math.sqrt(self.d_model))
        for layer in self.encoder:
            h = layer(h, src_mask)
        return h

    def decode(self, tgt, memory, tgt_mask, src_mask):
        h = self.pos(self.tgt_emb(tgt) * math.sqrt(self.d_model))
        maps = []
        for layer in self.decoder:
            h, a = layer(h, memory, tgt_mask, src_mask)
            maps.append(a)
        return h, maps

    def forward(self, src, tgt_in):
        sm = padding_mask(src)
        mem = self.encode(src, sm)
        h, maps = self.decode(tgt_in, mem, target_mask(tgt_in), sm)
        return self.generator(h), maps


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model = model.to(device)
    model.train()
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if p.dim() >= 2 else no_decay).append(p)
    optimizer = torch.optim.AdamW([
        {"params": decay, "weight_decay": 0.01},
        {"params": no_decay, "weight_decay": 0.0},
    ], lr=lr, betas=(0.9, 0.98), eps=1e-9)

    def lr_lambda(step):
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
    for step in range(steps):
        src, tgt = make_batch(batch_size, device=device)
        decoder_input = tgt[:, :-1]
        labels = tgt[:, 1:]
        logits, _ = model(src, decoder_input)
        loss = F.cross_entropy(logits.transpose(1, 2), labels, ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        scheduler.step()
        if step % log_every == 0:
            print(f"[{step}] loss={loss.item():.4f} lr={scheduler.get_last_lr()[0]:.6f}")
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    sm = padding_mask(src)
    memory = model.encode(src, sm)
    ys = torch.full((src.shape[0], 1), SOS, dtype=torch.long, device=src.device)
    maps = None
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(max_len - 1):
        h, maps = model.decode(ys, memory, target_mask(ys), sm)
        nxt = model.generator(h[:, -1, :]).argmax(dim=-1)
        ys = torch.cat([ys, nxt.unsqueeze(1)], dim=1)
        done |= nxt == EOS
        if done.all():
            break
    return ys, maps


if __name__ == "__main__":
    torch.manual_seed(0)
    m = train(MiniTransformer())
    s, _ = make_batch(4)
    print(s)
    print(greedy_decode(m, s)[0])
