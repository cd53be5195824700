# Reversal transformer -- written "functionally": the maths lives in plain
# functions, the nn.Modules only own parameters and call into them.
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, SOS, EOS = 10, 11, 12
VOCAB = 13


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    lengths = torch.randint(min_len, max_len + 1, (batch_size,)).tolist()
    width = max(lengths)
    rows_src, rows_tgt = [], []
    for n in lengths:
        digits = torch.randint(0, 10, (n,)).tolist()
        rows_src.append(digits + [PAD] * (width - n))
        rows_tgt.append([SOS] + digits[::-1] + [EOS] + [PAD] * (width - n))
    return (torch.tensor(rows_src, dtype=torch.long, device=device),
            torch.tensor(rows_tgt, dtype=torch.long, device=device))


def sinusoid_table(n_pos, dim):
    position = torch.arange(n_pos, dtype=torch.float32)[:, None]
    freq = 10000.0 ** (-torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    angles = position * freq[None, :]
    table = torch.empty(n_pos, dim)
    table[:, 0::2] = angles.sin()
    table[:, 1::2] = angles.cos()
    return table


def attention(q, k, v, keep=None, drop=None):
    """q: (..., Tq, dk), k/v: (..., Tk, dk); keep: bool, True = may attend."""
    logits = torch.matmul(q, k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    if keep is not None:
        logits = logits.masked_fill(keep.logical_not(), -1e9)
    weights = logits.softmax(dim=-1)
    if drop is not None:
        weights = drop(weights)
    return weights @ v, weights


def split_heads(x, n_heads):
    b, t, d = x.shape
    return x.reshape(b, t, n_heads, d // n_heads).permute(0, 2, 1, 3)


def merge_heads(x):
    b, h, t, dk = x.shape
    return x.permute(0, 2, 1, 3).reshape(b, t, h * dk)


def padding_mask(x, pad=PAD):
    return (x != pad)[:, None, None, :]


def target_mask(x, pad=PAD):
    t = x.shape[1]
    lower = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
    return padding_mask(x, pad) & lower[None, None]


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.register_buffer('table', sinusoid_table(max_len, d_model))
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.drop(x + self.table[: x.shape[1]])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.n_heads = num_heads
        self.proj = nn.ModuleDict({name: nn.Linear(d_model, d_model) for name in 'qkvo'})
        self.drop = nn.Dropout(dropout)

    def forward(self, q, k, v, mask=None):
        heads = [split_heads(self.proj[n](t), self.n_heads) for n, t in zip('qkv', (q, k, v))]
        ctx, weights = attention(*heads, keep=mask, drop=self.drop)
        return self.proj['o'](merge_heads(ctx)), weights


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.up, self.down = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.down(self.drop(F.relu(self.up(x))))


def add_norm(norm, x, y, drop):
    return norm(x + drop(y))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.mha = MultiHeadAttention(d_model, h, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norms = nn.ModuleList([nn.LayerNorm(d_model) for _ in range(2)])
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        x = add_norm(self.norms[0], x, self.mha(x, x, x, mask)[0], self.drop)
        return add_norm(self.norms[1], x, self.ffn(x), self.drop)


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_mha = MultiHeadAttention(d_model, h, dropout)
        self.cross_mha = MultiHeadAttention(d_model, h, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norms = nn.ModuleList([nn.LayerNorm(d_model) for _ in range(3)])
        self.drop = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        x = add_norm(self.norms[0], x, self.self_mha(x, x, x, tgt_mask)[0], self.drop)
        ctx, cross = self.cross_mha(x, memory, memory, src_mask)
        x = add_norm(self.norms[1], x, ctx, self.drop)
        return add_norm(self.norms[2], x, self.ffn(x), self.drop), cross


class MiniTransformer(nn.Module):
    def __init__(self, vocab=VOCAB, d_model=64, h=4, d_ff=256, num_layers=2,
                 dropout=0.1, max_len=64):
        super().__init__()
        self.scale = math.sqrt(d_model)
        self.src_tok = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.tgt_tok = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.pos = PositionalEncoding(d_model, max_len, dropout)
        self.encoder = nn.ModuleList([EncoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.decoder = nn.ModuleList([DecoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.generator = nn.Linear(d_model, vocab)
        for w in self.parameters():
            if w.dim() > 1:
                nn.init.xavier_uniform_(w)

    def encode(self, src, src_mask):
        x = self.pos(self.src_tok(src) * self.scale)
        for layer in self.encoder:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, tgt_mask, src_mask):
        x = self.pos(self.tgt_tok(tgt) * self.scale)
        maps = []
        for layer in self.decoder:
            x, cross = layer(x, memory, tgt_mask, src_mask)
            maps.append(cross)
        return x, maps

    def forward(self, src, tgt_in):
        sm = padding_mask(src)
        x, maps = self.decode(tgt_in, self.encode(src, sm), target_mask(tgt_in), sm)
        return self.generator(x), maps


def seq_loss(logits, labels):
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=PAD)


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: min(1.0, (i + 1) / warmup))
    for step in range(1, steps + 1):
        src, tgt = make_batch(batch_size, device=device)
        logits, _ = model(src, tgt[:, :-1])
        loss = seq_loss(logits, tgt[:, 1:])
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step == 1 or step % log_every == 0:
            print(f"[{step}] loss={loss.item():.4f}")
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    sm = padding_mask(src)
    memory = model.encode(src, sm)
    ys = torch.full((src.shape[0], 1), SOS, dtype=torch.long, device=src.device)
    maps = []
    for _ in range(max_len - 1):
        hidden, maps = model.decode(ys, memory, target_mask(ys), sm)
        nxt = model.generator(hidden[:, -1]).argmax(dim=-1, keepdim=True)
        ys = torch.cat((ys, nxt), dim=1)
        if bool((nxt == EOS).all()):
            break
    return ys, maps


if __name__ == "__main__":
    torch.manual_seed(0)
    m = train(MiniTransformer(), steps=1500, batch_size=64)
    s, _ = make_batch(3)
    print(s.tolist())
    print(greedy_decode(m, s)[0].tolist())
