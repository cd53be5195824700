# Reversal transformer -- my version for the assignment.
# Pre-norm blocks, einsum attention, AdamW + OneCycleLR, bf16 autocast
# (bf16 has fp32's exponent range so no GradScaler is needed).
import math
import torch
from torch import nn
import torch.nn.functional as F

PAD = 10
SOS = 11
EOS = 12
VOCAB = 13


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    lens = torch.randint(min_len, max_len + 1, (batch_size,)).tolist()
    width = max(lens)
    src = torch.full((batch_size, width), PAD)
    tgt = torch.full((batch_size, width + 2), PAD)
    for i, n in enumerate(lens):
        s = torch.randint(0, 10, (n,))
        src[i, :n] = s
        tgt[i, :n + 2] = torch.cat([torch.tensor([SOS]), s.flip(0), torch.tensor([EOS])])
    return src.to(device), tgt.to(device)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        pe = torch.zeros(max_len, d_model)
        for pos in range(max_len):
            for i in range(0, d_model, 2):
                angle = pos / (10000 ** (i / d_model))
                pe[pos, i] = math.sin(angle)
                pe[pos, i + 1] = math.cos(angle)
        self.register_buffer('pe', pe)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, x):
        return self.dropout(x + self.pe[: x.size(1)])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.n_heads = num_heads
        self.head_dim = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.o_proj = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, q, k, v, mask=None):
        b, tq, _ = q.shape
        tk = k.shape[1]
        q = self.q_proj(q).view(b, tq, self.n_heads, self.head_dim)
        k = self.k_proj(k).view(b, tk, self.n_heads, self.head_dim)
        v = self.v_proj(v).view(b, tk, self.n_heads, self.head_dim)
        scores = torch.einsum('bqhd,bkhd->bhqk', q, k)
        if mask is not None:
            scores = scores.masked_fill(mask.logical_not(), -1e4)
        probs = F.softmax(scores.float(), dim=-1).to(v.dtype)
        out = torch.einsum('bhqk,bkhd->bqhd', self.dropout(probs), v)
        return self.o_proj(out.reshape(b, tq, -1)), probs


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model), nn.Dropout(dropout))

    def forward(self, x):
        return self.layers(x)


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.norm_a = nn.LayerNorm(d_model)
        self.norm_b = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        y = self.norm_a(x)
        x = x + self.dropout(self.attn(y, y, y, mask)[0])
        x = x + self.ff(self.norm_b(x))
        return x


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.norm_a = nn.LayerNorm(d_model)
        self.norm_b = nn.LayerNorm(d_model)
        self.norm_c = nn.LayerNorm(d_model)
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.src_attn = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        y = self.norm_a(x)
        x = x + self.dropout(self.self_attn(y, y, y, tgt_mask)[0])
        y = self.norm_b(x)
        ctx, cross = self.src_attn(y, memory, memory, src_mask)
        x = x + self.dropout(ctx)
        x = x + self.ff(self.norm_c(x))
        return x, cross


def padding_mask(x, pad=PAD):
    return (x != pad).unsqueeze(1).unsqueeze(1)          # (B,1,1,T) True = real token


def target_mask(x, pad=PAD):
    n = x.shape[-1]
    lower = torch.tril(torch.ones((1, 1, n, n), dtype=torch.bool, device=x.device))
    return lower & padding_mask(x, pad)


class MiniTransformer(nn.Module):
    def __init__(self, vocab=13, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        super().__init__()
        self.scale = d_model ** 0.5
        self.src_embed = nn.Embedding(vocab, d_model)
        self.tgt_embed = nn.Embedding(vocab, d_model)
        self.pe = PositionalEncoding(d_model, max_len, dropout)
        self.enc_layers = nn.ModuleList(EncoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers))
        self.dec_layers = nn.ModuleList(DecoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers))
        self.enc_norm = nn.LayerNorm(d_model)
        self.dec_norm = nn.LayerNorm(d_model)
        self.generator = nn.Linear(d_model, vocab)
        nn.init.normal_(self.src_embed.weight, std=d_model ** -0.5)
        nn.init.normal_(self.tgt_embed.weight, std=d_model ** -0.5)

    def encode(self, src, src_mask):
        x = self.pe(self.src_embed(src) * self.scale)
        for lyr in self.enc_layers:
            x = lyr(x, src_mask)
        return self.enc_norm(x)

    def decode(self, tgt, memory, tgt_mask, src_mask):
        x = self.pe(self.tgt_embed(tgt) * self.scale)
        attn_maps = []
        for lyr in self.dec_layers:
            x, a = lyr(x, memory, tgt_mask, src_mask)
            attn_maps.append(a)
        return self.dec_norm(x), attn_maps

    def forward(self, src, tgt_in):
        src_mask = padding_mask(src)
        memory = self.encode(src, src_mask)
        out, attn_maps = self.decode(tgt_in, memory, target_mask(tgt_in), src_mask)
        return self.generator(out), attn_maps


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=lr, total_steps=steps, pct_start=min(0.3, warmup / steps), anneal_strategy='cos')
    dev_type = torch.device(device).type
    for it in range(1, steps + 1):
        src, tgt = make_batch(batch_size, device=device)
        with torch.autocast(device_type=dev_type, dtype=torch.bfloat16):
            logits, _ = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)),
                               tgt[:, 1:].reshape(-1), ignore_index=PAD)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if it == 1 or it % log_every == 0:
            print('step', it, 'loss', round(loss.item(), 4))
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    src_mask = padding_mask(src)
    memory = model.encode(src, src_mask)
    out = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)
    maps = []
    for _ in range(max_len - 1):
        dec, maps = model.decode(out, memory, target_mask(out), src_mask)
        tok = model.generator(dec[:, -1]).argmax(-1)
        out = torch.cat([out, tok[:, None]], dim=1)
        if bool((tok == EOS).all()):
            break
    return out, maps


if __name__ == '__main__':
    net = train(MiniTransformer(), steps=1500)
    s, t = make_batch(5)
    print(greedy_decode(net, s)[0])
