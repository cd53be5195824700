#  CS-4xx  HW3  --  "no black boxes" version: my own LayerNorm, my own softmax-attention,
#  only nn.Linear / nn.Embedding / nn.Dropout from torch.
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, SOS, EOS = 10, 11, 12
VOCAB = 13


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    n = torch.randint(min_len, max_len + 1, (batch_size,))
    width = int(n.max())
    src = torch.full((batch_size, width), PAD, dtype=torch.long)
    tgt = torch.full((batch_size, width + 2), PAD, dtype=torch.long)
    for r in range(batch_size):
        k = int(n[r])
        d = torch.randint(0, 10, (k,))
        src[r, :k] = d
        tgt[r, 0] = SOS
        tgt[r, 1:k + 1] = d.flip(0)
        tgt[r, k + 1] = EOS
    return src.to(device), tgt.to(device)


class LayerNorm(nn.Module):
    """y = gamma * (x - mean) / sqrt(var + eps) + beta, statistics over the feature dim."""

    def __init__(self, features, eps=1e-5):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(features))
        self.beta = nn.Parameter(torch.zeros(features))
        self.eps = eps

    def forward(self, x):
        mu = x.mean(dim=-1, keepdim=True)
        var = (x - mu).pow(2).mean(dim=-1, keepdim=True)      # biased, like nn.LayerNorm
        return self.gamma * (x - mu) / torch.sqrt(var + self.eps) + self.beta


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        table = torch.zeros(max_len, d_model)
        for pos in range(max_len):
            for i in range(0, d_model, 2):
                angle = pos / (10000 ** (i / d_model))          # i is already the even index 2k
                table[pos, i] = math.sin(angle)
                if i + 1 < d_model:
                    table[pos, i + 1] = math.cos(angle)
        self.register_buffer('table', table.unsqueeze(0))

    def forward(self, x):
        return self.drop(x + self.table[:, :x.size(1), :])


def padding_mask(x, pad=PAD):
    return (x != pad).unsqueeze(-2).unsqueeze(-2)


def target_mask(x, pad=PAD):
    T = x.size(-1)
    no_peek = torch.ones(T, T, device=x.device).tril().bool()
    return padding_mask(x, pad) & no_peek


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.heads = num_heads
        self.dh = d_model // num_heads
        self.to_q = nn.Linear(d_model, d_model)
        self.to_k = nn.Linear(d_model, d_model)
        self.to_v = nn.Linear(d_model, d_model)
        self.to_out = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, q, k, v, mask=None):
        B, Tq, D = q.shape
        Tk = k.shape[1]
        Q = self.to_q(q).view(B, Tq, self.heads, self.dh)
        K = self.to_k(k).view(B, Tk, self.heads, self.dh)
        V = self.to_v(v).view(B, Tk, self.heads, self.dh)
        s = torch.einsum('bqhd,bkhd->bhqk', Q, K) / math.sqrt(self.dh)
        if mask is not None:
            s = s.masked_fill(mask.logical_not(), -1e9)
        s = s - s.amax(dim=-1, keepdim=True)                   # my own stable softmax
        e = s.exp()
        p = e / e.sum(dim=-1, keepdim=True)
        ctx = torch.einsum('bhqk,bkhd->bqhd', self.drop(p), V).reshape(B, Tq, D)
        return self.to_out(ctx), p


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.a = nn.Linear(d_model, d_ff)
        self.b = nn.Linear(d_ff, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.b(self.drop(torch.clamp(self.a(x), min=0.0)))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.mha = MultiHeadAttention(d_model, h, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm_a = LayerNorm(d_model)
        self.norm_b = LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        h, _ = self.mha(x, x, x, mask)
        x = self.norm_a(x + self.drop(h))
        x = self.norm_b(x + self.drop(self.ffn(x)))
        return x


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.masked_mha = MultiHeadAttention(d_model, h, dropout)
        self.enc_dec_mha = MultiHeadAttention(d_model, h, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm_a = LayerNorm(d_model)
        self.norm_b = LayerNorm(d_model)
        self.norm_c = LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        h, _ = self.masked_mha(x, x, x, tgt_mask)
        x = self.norm_a(x + self.drop(h))
        h, cross = self.enc_dec_mha(x, memory, memory, src_mask)
        x = self.norm_b(x + self.drop(h))
        x = self.norm_c(x + self.drop(self.ffn(x)))
        return x, cross


class MiniTransformer(nn.Module):
    def __init__(self, vocab=VOCAB, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1,
                 max_len=64):
        super().__init__()
        self.d_model = d_model
        self.src_embed = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.tgt_embed = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.positions = PositionalEncoding(d_model, max_len, dropout)
        self.encoder_stack = nn.ModuleList()
        self.decoder_stack = nn.ModuleList()
        for _ in range(num_layers):
            self.encoder_stack.append(EncoderLayer(d_model, h, d_ff, dropout))
            self.decoder_stack.append(DecoderLayer(d_model, h, d_ff, dropout))
        self.generator = nn.Linear(d_model, vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src, src_mask):
        x = self.positions(self.src_embed(src) * math.sqrt(self.d_model))
        for layer in self.encoder_stack:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, tgt_mask, src_mask):
        x = self.positions(self.tgt_embed(tgt) * math.sqrt(self.d_model))
        maps = []
        for layer in self.decoder_stack:
            x, cross = layer(x, memory, tgt_mask, src_mask)
            maps.append(cross)
        return x, maps

    def forward(self, src, tgt_in):
        src_mask = padding_mask(src)
        memory = self.encode(src, src_mask)
        x, maps = self.decode(tgt_in, memory, target_mask(tgt_in), src_mask)
        return self.generator(x), maps


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    for step in range(1, steps + 1):
        for g in opt.param_groups:                     # manual linear warmup
            g['lr'] = lr * min(step / warmup, 1.0)
        src, tgt = make_batch(batch_size, device=device)
        logits, _ = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % log_every == 0 or step == 1:
            print(f"step {step}: loss {loss.item():.4f}  lr {opt.param_groups[0]['lr']:.1e}")
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
        nxt = model.generator(out[:, -1]).argmax(-1, keepdim=True)
        ys = torch.cat([ys, nxt], dim=1)
        if (nxt == EOS).all():
            break
    return ys, maps
