"""Seq2seq reversal built on torch.nn.MultiheadAttention (batch_first=True).

nn.MultiheadAttention takes masks where True means *blocked*, so my
padding_mask / target_mask also use True = blocked, end to end.
Label smoothing through CrossEntropyLoss(label_smoothing=0.1).
"""
import math
import torch
import torch.nn as nn

PAD, SOS, EOS, VOCAB = 10, 11, 12, 13


def make_batch(batch_size, min_len=4, max_len=10, device="cpu"):
    L = torch.randint(min_len, max_len + 1, (batch_size,))
    src = torch.full((batch_size, int(L.max())), PAD, dtype=torch.long)
    tgt = torch.full((batch_size, int(L.max()) + 2), PAD, dtype=torch.long)
    for i in range(batch_size):
        n = L[i].item()
        x = torch.randint(0, 10, (n,))
        src[i, :n] = x
        tgt[i, 0] = SOS
        tgt[i, 1:n + 1] = x.flip(-1)
        tgt[i, n + 1] = EOS
    return src.to(device), tgt.to(device)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        pos = torch.arange(max_len).float()[:, None]
        i2 = torch.arange(0, d_model, 2).float()
        angles = pos / torch.pow(10000.0, i2 / d_model)
        pe = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)   # interleave sin/cos
        self.register_buffer("pe", pe[None])

    def forward(self, x):
        return self.dropout(x + self.pe[:, : x.shape[1], :])


class MultiHeadAttention(nn.Module):
    """Thin wrapper: mask is (B,1,1,Tk) or (B,1,Tq,Tk) with True = do not attend."""

    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.h = num_heads
        self.inner = nn.MultiheadAttention(d_model, num_heads, dropout=dropout, batch_first=True)

    def forward(self, q, k, v, mask=None):
        attn_mask = None
        if mask is not None:
            B, Tq, Tk = q.size(0), q.size(1), k.size(1)
            blocked = mask.expand(B, self.h, Tq, Tk).reshape(B * self.h, Tq, Tk)
            # a float bias rather than the bool mask: an all-padding row stays finite (bool gives NaN)
            attn_mask = torch.zeros(blocked.shape, device=q.device).masked_fill(blocked, -1e9)
        out, w = self.inner(q, k, v, attn_mask=attn_mask, need_weights=True, average_attn_weights=False)
        return out, w


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff)
        self.w2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.w2(self.dropout(torch.relu(self.w1(x))))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.sa = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        sa, _ = self.sa(x, x, x, mask)
        x = self.norm1(x + self.dropout(sa))
        return self.norm2(x + self.dropout(self.ff(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.sa = MultiHeadAttention(d_model, h, dropout)
        self.ca = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        sa, _ = self.sa(x, x, x, tgt_mask)
        x = self.norm1(x + self.dropout(sa))
        ca, weights = self.ca(memory, x, x, src_mask)
        x = self.norm2(x + self.dropout(ca))
        x = self.norm3(x + self.dropout(self.ff(x)))
        return x, weights


def padding_mask(x, pad=PAD):
    # True where the key is padding -> blocked
    return (x == pad).unsqueeze(1).unsqueeze(2)


def target_mask(x, pad=PAD):
    T = x.size(1)
    future = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
    return padding_mask(x, pad) | future.view(1, 1, T, T)


class MiniTransformer(nn.Module):
    def __init__(self, vocab=13, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        super().__init__()
        self.d_model = d_model
        self.src_tok = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.tgt_tok = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.posenc = PositionalEncoding(d_model, max_len, dropout)
        self.encoder_layers = nn.ModuleList([EncoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.decoder_layers = nn.ModuleList([DecoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.generator = nn.Linear(d_model, vocab)

    def encode(self, src, src_mask):
        x = self.posenc(self.src_tok(src) * math.sqrt(self.d_model))
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, tgt_mask, src_mask):
        x = self.posenc(self.tgt_tok(tgt) * math.sqrt(self.d_model))
        maps = []
        for layer in self.decoder_layers:
            x, w = layer(x, memory, tgt_mask, src_mask)
            maps.append(w)
        return x, maps

    def forward(self, src, tgt_in):
        src_mask = padding_mask(src)
        mem = self.encode(src, src_mask)
        x, maps = self.decode(tgt_in, mem, target_mask(tgt_in), src_mask)
        return self.generator(x), maps


def train(model, steps=3000, batch_size=64, lr=1e-3, device="cpu", warmup=400, log_every=200):
    model.to(device).train()
    criterion = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=0.1)
    optim = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    warm = torch.optim.lr_scheduler.LinearLR(optim, start_factor=1.0 / warmup, end_factor=1.0, total_iters=warmup)
    for step in range(steps):
        src, tgt = make_batch(batch_size, device=device)
        logits, _ = model(src, tgt[:, :-1])
        loss = criterion(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1))
        optim.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        warm.step()
        if (step + 1) % log_every == 0:
            print(f"step {step + 1}: {loss.item():.3f}")
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    src_mask = padding_mask(src)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)
    maps = []
    for _ in range(max_len - 1):
        out, maps = model.decode(ys, memory, target_mask(ys), src_mask)
        next_token = model.generator(out[:, -1]).argmax(-1, keepdim=True)
        ys = torch.cat((ys, next_token), dim=1)
        if (next_token.squeeze(1) == EOS).all():
            break
    return ys, maps


if __name__ == "__main__":
    m = train(MiniTransformer())
    src, _ = make_batch(3)
    print(src, greedy_decode(m, src)[0], sep="\n")
