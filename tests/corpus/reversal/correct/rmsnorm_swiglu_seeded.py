"""LLaMA-flavoured encoder-decoder for reversal: RMSNorm pre-norm, SwiGLU
feed-forward, bias-free projections. train() seeds itself and limits threads
so runs are reproducible on the lab machines."""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, SOS, EOS = 10, 11, 12
VOCAB = 13


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    lens = torch.randint(min_len, max_len + 1, (batch_size,))
    T = int(lens.max())
    src = torch.full((batch_size, T), PAD, dtype=torch.long)
    tgt = torch.full((batch_size, T + 2), PAD, dtype=torch.long)
    for i, L in enumerate(lens.tolist()):
        s = torch.randint(0, 10, (L,))
        src[i, :L] = s
        tgt[i, 0] = SOS
        tgt[i, 1:L + 1] = s.flip(0)
        tgt[i, L + 1] = EOS
    return src.to(device), tgt.to(device)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        pe = torch.zeros(max_len, d_model)
        pos = torch.arange(max_len).unsqueeze(1).float()
        div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer('pe', pe.unsqueeze(0))

    def forward(self, x):
        return self.dropout(x + self.pe[:, :x.size(1)])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.n_heads = num_heads
        self.head_dim = d_model // num_heads
        self.wq = nn.Linear(d_model, d_model, bias=False)
        self.wk = nn.Linear(d_model, d_model, bias=False)
        self.wv = nn.Linear(d_model, d_model, bias=False)
        self.wo = nn.Linear(d_model, d_model, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, q, k, v, mask=None):
        bsz, qlen, _ = q.shape
        klen = k.shape[1]
        xq = self.wq(q).view(bsz, qlen, self.n_heads, self.head_dim).transpose(1, 2)
        xk = self.wk(k).view(bsz, klen, self.n_heads, self.head_dim).transpose(1, 2)
        xv = self.wv(v).view(bsz, klen, self.n_heads, self.head_dim).transpose(1, 2)
        scores = torch.matmul(xq, xk.transpose(2, 3)) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(~mask, float('-1e9'))
        scores = F.softmax(scores.float(), dim=-1).type_as(xq)
        output = torch.matmul(self.dropout(scores), xv)
        output = output.transpose(1, 2).contiguous().view(bsz, qlen, -1)
        return self.wo(output), scores


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        hidden = 2 * d_ff // 3
        self.w1 = nn.Linear(d_model, hidden, bias=False)
        self.w3 = nn.Linear(d_model, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d_model, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.w2(F.silu(self.w1(x)) * self.w3(x)))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.attention_norm = RMSNorm(d_model)
        self.attention = MultiHeadAttention(d_model, h, dropout)
        self.ffn_norm = RMSNorm(d_model)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)

    def forward(self, x, mask=None):
        n = self.attention_norm(x)
        h = x + self.attention(n, n, n, mask)[0]
        return h + self.feed_forward(self.ffn_norm(h))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.attention_norm = RMSNorm(d_model)
        self.attention = MultiHeadAttention(d_model, h, dropout)
        self.cross_norm = RMSNorm(d_model)
        self.cross_attention = MultiHeadAttention(d_model, h, dropout)
        self.ffn_norm = RMSNorm(d_model)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        n = self.attention_norm(x)
        h = x + self.attention(n, n, n, tgt_mask)[0]
        c, cross = self.cross_attention(self.cross_norm(h), memory, memory, src_mask)
        h = h + c
        return h + self.feed_forward(self.ffn_norm(h)), cross


def padding_mask(x, pad=PAD):
    return (x != pad).unsqueeze(1).unsqueeze(2)


def target_mask(x, pad=PAD):
    T = x.size(1)
    return padding_mask(x, pad) & torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))


class MiniTransformer(nn.Module):
    def __init__(self, vocab=13, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        super().__init__()
        self.d_model = d_model
        self.tok_src = nn.Embedding(vocab, d_model)
        self.tok_tgt = nn.Embedding(vocab, d_model)
        self.pos = PositionalEncoding(d_model, max_len, dropout)
        self.enc_layers = nn.ModuleList([EncoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.dec_layers = nn.ModuleList([DecoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.enc_norm = RMSNorm(d_model)
        self.dec_norm = RMSNorm(d_model)
        self.generator = nn.Linear(d_model, vocab, bias=False)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src, src_mask):
        h = self.pos(self.tok_src(src) * math.sqrt(self.d_model))
        for layer in self.enc_layers:
            h = layer(h, src_mask)
        return self.enc_norm(h)

    def decode(self, tgt, memory, tgt_mask, src_mask):
        h = self.pos(self.tok_tgt(tgt) * math.sqrt(self.d_model))
        maps = []
        for layer in self.dec_layers:
            h, c = layer(h, memory, tgt_mask, src_mask)
            maps.append(c)
        return self.dec_norm(h), maps

    def forward(self, src, tgt_in):
        sm = padding_mask(src)
        h, maps = self.decode(tgt_in, self.encode(src, sm), target_mask(tgt_in), sm)
        return self.generator(h), maps


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    torch.manual_seed(1234)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.05)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))
    for step in range(steps):
        src, tgt = make_batch(batch_size, device=device)
        logits, _ = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1), ignore_index=PAD)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % log_every == 0:
            print(f'step {step} loss {loss.item():.4f}')
    return model


@torch.inference_mode()
def greedy_decode(model, src, max_len=20):
    model.eval()
    sm = padding_mask(src)
    mem = model.encode(src, sm)
    ys = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)
    for _ in range(max_len - 1):
        h, maps = model.decode(ys, mem, target_mask(ys), sm)
        nxt = model.generator(h[:, -1]).argmax(-1, keepdim=True)
        ys = torch.cat([ys, nxt], dim=1)
        if (nxt == EOS).all():
            break
    return ys, maps
