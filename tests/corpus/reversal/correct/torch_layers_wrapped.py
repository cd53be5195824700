"""Reversal with PyTorch's own nn.TransformerEncoderLayer / nn.TransformerDecoderLayer
inside the assignment's EncoderLayer / DecoderLayer classes. The built-in layers
want float or True=blocked masks, so the wrappers convert my (B,1,Tq,Tk)
True=keep masks; the decoder cross-attention map is recomputed with a forward
hook on the layer's multihead_attn (need_weights is off inside nn.Transformer*)."""
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


def _to_attn_mask(mask, num_heads, Tq):
    """(B,1,1|Tq,Tk) True=keep -> (B*h, Tq, Tk) float additive mask."""
    if mask is None:
        return None
    B, _, _, Tk = mask.shape
    m = mask.expand(B, num_heads, Tq, Tk).reshape(B * num_heads, Tq, Tk)
    return torch.zeros(m.shape, device=m.device).masked_fill(~m, -1e9)


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.h = h
        self.layer = nn.TransformerEncoderLayer(d_model, h, d_ff, dropout, activation=F.silu, batch_first=True)

    def forward(self, x, mask=None):
        return self.layer(x, src_mask=_to_attn_mask(mask, self.h, x.size(1)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.h = h
        self.layer = nn.TransformerDecoderLayer(d_model, h, d_ff, dropout, activation=F.silu, batch_first=True)
        self._cross = None
        self.layer.multihead_attn.register_forward_hook(self._grab, with_kwargs=True)

    def _grab(self, module, args, kwargs, output):
        q, k = args[0], args[1]
        W = module.in_proj_weight
        b = module.in_proj_bias
        d = q.size(-1)
        Q = F.linear(q, W[:d], b[:d]).unflatten(-1, (self.h, -1)).transpose(1, 2)
        K = F.linear(k, W[d:2 * d], b[d:2 * d]).unflatten(-1, (self.h, -1)).transpose(1, 2)
        s = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
        m = kwargs.get('attn_mask')
        if m is not None:
            s = s + m.view(s.shape)
        self._cross = s.softmax(-1).detach()

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        Tq = x.size(1)
        out = self.layer(x, memory, tgt_mask=_to_attn_mask(tgt_mask, self.h, Tq),
                         memory_mask=_to_attn_mask(src_mask, self.h, Tq))
        return out, self._cross


def padding_mask(x, pad=PAD):
    return (x != pad)[:, None, None, :]


def target_mask(x, pad=PAD):
    T = x.size(1)
    return padding_mask(x, pad) & torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))


class MiniTransformer(nn.Module):
    def __init__(self, vocab=13, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        super().__init__()
        self.d_model = d_model
        self.src_emb = nn.Embedding(vocab, d_model)
        self.tgt_emb = nn.Embedding(vocab, d_model)
        self.pos = PositionalEncoding(d_model, max_len, dropout)
        self.enc = nn.ModuleList([EncoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.dec = nn.ModuleList([DecoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.generator = nn.Linear(d_model, vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src, src_mask):
        x = self.pos(self.src_emb(src) * math.sqrt(self.d_model))
        for layer in self.enc:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, tgt_mask, src_mask):
        x = self.pos(self.tgt_emb(tgt) * math.sqrt(self.d_model))
        maps = []
        for layer in self.dec:
            x, cross = layer(x, memory, tgt_mask, src_mask)
            maps.append(cross)
        return x, maps

    def forward(self, src, tgt_in):
        sm = padding_mask(src)
        memory = self.encode(src, sm)
        out, maps = self.decode(tgt_in, memory, target_mask(tgt_in), sm)
        return self.generator(out), maps


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))
    for step in range(steps):
        src, tgt = make_batch(batch_size, device=device)
        logits, _ = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % log_every == 0:
            print(step, f"{loss.item():.4f}")
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    sm = padding_mask(src)
    memory = model.encode(src, sm)
    ys = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)
    for _ in range(max_len - 1):
        out, maps = model.decode(ys, memory, target_mask(ys), sm)
        nxt = model.generator(out[:, -1]).argmax(-1, keepdim=True)
        ys = torch.cat([ys, nxt], 1)
        if (nxt == EOS).all():
            break
    return ys, maps
