# (T, B, D) inside the attention, like nn.MultiheadAttention; (B, T) at the interface.
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
    for b, n in enumerate(lens.tolist()):
        s = torch.randint(0, 10, (n,))
        src[b, :n] = s
        tgt[b, :n + 2] = torch.cat([torch.tensor([SOS]), s.flip(0), torch.tensor([EOS])])
    return src.to(device), tgt.to(device)


def padding_mask(x, pad=PAD):
    return (x != pad).unsqueeze(1).unsqueeze(2)          # (B, 1, 1, T)


def target_mask(x, pad=PAD):
    T = x.size(1)
    tri = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
    return padding_mask(x, pad) & tri                     # (B, 1, T, T)


class PositionalEncoding(nn.Module):
    """Stores the table time-major, (max_len, 1, d); accepts (B, T, d) input."""

    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        position = torch.arange(max_len).unsqueeze(1).float()
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer('pe', pe)

    def forward(self, x):
        # x is (B, T, d): move time first, add, move back
        x = x.transpose(0, 1)
        x = x + self.pe[:x.size(0)]
        return self.dropout(x.transpose(0, 1))


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.h = num_heads
        self.hd = d_model // num_heads
        self.in_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def _time_major_heads(self, x):
        # x: (T, B, d) -> (B*h, T, hd), exactly like F.multi_head_attention_forward
        T, B, _ = x.shape
        return x.contiguous().view(B * self.h, T, self.hd)

    def forward(self, q, k, v, mask=None):
        B, Tq, D = q.shape
        Tk = k.size(1)
        wq, wk, wv = self.in_proj.weight.chunk(3, dim=0)
        bq, bk, bv = self.in_proj.bias.chunk(3, dim=0)
        q_t = F.linear(q.transpose(0, 1), wq, bq)         # (Tq, B, d)
        k_t = F.linear(k.transpose(0, 1), wk, bk)
        v_t = F.linear(v.transpose(0, 1), wv, bv)
        qh = self._time_major_heads(q_t) / math.sqrt(self.hd)
        kh = self._time_major_heads(k_t)
        vh = self._time_major_heads(v_t)
        scores = torch.bmm(qh, kh.transpose(1, 2))        # (B*h, Tq, Tk)
        if mask is not None:
            m = mask.expand(B, self.h, Tq, Tk).reshape(B * self.h, Tq, Tk)
            scores = scores.masked_fill(~m, -1e9)
        attn = torch.softmax(scores, dim=-1)
        out = torch.bmm(self.dropout(attn), vh)           # (B*h, Tq, hd)
        out = out.transpose(0, 1).contiguous().view(Tq, B, D)
        out = self.out_proj(out).transpose(0, 1)          # back to (B, Tq, D)
        return out, attn.view(B, self.h, Tq, Tk)


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.dropout(torch.relu(self.linear1(x))))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, mask)[0]))
        return self.norm2(x + self.dropout(self.ff(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.enc_attn = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, tgt_mask)[0]))
        y, cross = self.enc_attn(x, memory, memory, src_mask)
        x = self.norm2(x + self.dropout(y))
        return self.norm3(x + self.dropout(self.ff(x))), cross


class MiniTransformer(nn.Module):
    def __init__(self, vocab=VOCAB, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1,
                 max_len=64):
        super().__init__()
        self.d_model = d_model
        self.embed_src = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.embed_tgt = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.pos = PositionalEncoding(d_model, max_len, dropout)
        self.encoder = nn.ModuleList([EncoderLayer(d_model, h, d_ff, dropout)
                                      for _ in range(num_layers)])
        self.decoder = nn.ModuleList([DecoderLayer(d_model, h, d_ff, dropout)
                                      for _ in range(num_layers)])
        self.generator = nn.Linear(d_model, vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src, src_mask):
        x = self.pos(self.embed_src(src) * math.sqrt(self.d_model))
        for layer in self.encoder:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, tgt_mask, src_mask):
        x = self.pos(self.embed_tgt(tgt) * math.sqrt(self.d_model))
        maps = []
        for layer in self.decoder:
            x, a = layer(x, memory, tgt_mask, src_mask)
            maps.append(a)
        return x, maps

    def forward(self, src, tgt_in):
        sm = padding_mask(src)
        mem = self.encode(src, sm)
        out, maps = self.decode(tgt_in, mem, target_mask(tgt_in), sm)
        return self.generator(out), maps


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / warmup, 1.0))
    for step in range(1, steps + 1):
        src, tgt = make_batch(batch_size, device=device)
        logits, _ = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1), ignore_index=PAD)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % log_every == 0 or step == 1:
            print(f"{step:5d} {loss.item():.4f}")
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    sm = padding_mask(src)
    mem = model.encode(src, sm)
    ys = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)
    maps = []
    for _ in range(max_len - 1):
        out, maps = model.decode(ys, mem, target_mask(ys), sm)
        nxt = model.generator(out[:, -1]).argmax(-1, keepdim=True)
        ys = torch.cat([ys, nxt], 1)
        if (nxt == EOS).all():
            break
    return ys, maps
