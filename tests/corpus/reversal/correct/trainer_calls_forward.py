# Encoder-decoder for the reversal task, attention in the nanoGPT manner (attn_pdrop,
# resid_pdrop, the fused F.scaled_dot_product_attention kernel), trained by a small
# Trainer object whose step calls model.forward(...) directly, as some tutorials do
# (no forward hooks of the model's own; same result as model(...)).
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, SOS, EOS, VOCAB = 10, 11, 12, 13


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    lengths = torch.randint(min_len, max_len + 1, (batch_size,))
    width = int(lengths.max())
    src = torch.full((batch_size, width), PAD, dtype=torch.long)
    tgt = torch.full((batch_size, width + 2), PAD, dtype=torch.long)
    for row, n in enumerate(lengths.tolist()):
        digits = torch.randint(0, 10, (n,))
        src[row, :n] = digits
        tgt[row, 0] = SOS
        tgt[row, 1:n + 1] = torch.flip(digits, dims=[0])
        tgt[row, n + 1] = EOS
    return src.to(device), tgt.to(device)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=256, dropout=0.1):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        position = torch.arange(max_len, dtype=torch.float).unsqueeze(1)
        freq = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float) / d_model)
        table = torch.zeros(max_len, d_model)
        table[:, 0::2] = torch.sin(position * freq)
        table[:, 1::2] = torch.cos(position * freq)
        self.register_buffer('table', table, persistent=False)

    def forward(self, x):
        return self.drop(x + self.table[:x.size(1)])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, attn_pdrop=0.1, resid_pdrop=0.1):
        super().__init__()
        assert d_model % n_head == 0
        self.n_head = n_head
        self.c_q = nn.Linear(d_model, d_model)
        self.c_kv = nn.Linear(d_model, 2 * d_model)
        self.c_proj = nn.Linear(d_model, d_model)
        self.attn_pdrop = attn_pdrop
        self.resid_drop = nn.Dropout(resid_pdrop)

    def _heads(self, x):
        B, T, C = x.size()
        return x.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)

    def forward(self, query, key, value, mask=None):
        B, T, C = query.size()
        q = self._heads(self.c_q(query))
        k = self._heads(self.c_kv(key).split(C, dim=2)[0])
        v = self._heads(self.c_kv(value).split(C, dim=2)[1])
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                           dropout_p=self.attn_pdrop if self.training else 0.0)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_drop(self.c_proj(y)), None       # the fused kernel keeps its weights


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.c_fc = nn.Linear(d_model, d_ff)
        self.c_proj = nn.Linear(d_ff, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.drop(self.c_proj(F.gelu(self.c_fc(x))))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_head, d_ff, dropout=0.1):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_head, dropout, dropout)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = FeedForward(d_model, d_ff, dropout)

    def forward(self, x, mask=None):
        x = self.ln_1(x + self.attn(x, x, x, mask)[0])
        return self.ln_2(x + self.mlp(x))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_head, d_ff, dropout=0.1):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.self_attn = MultiHeadAttention(d_model, n_head, dropout, dropout)
        self.ln_2 = nn.LayerNorm(d_model)
        self.cross_attn = MultiHeadAttention(d_model, n_head, dropout, dropout)
        self.ln_3 = nn.LayerNorm(d_model)
        self.mlp = FeedForward(d_model, d_ff, dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        x = self.ln_1(x + self.self_attn(x, x, x, tgt_mask)[0])
        a, cross = self.cross_attn(x, memory, memory, src_mask)
        x = self.ln_2(x + a)
        return self.ln_3(x + self.mlp(x)), cross


def src_keep(src):
    return (src != PAD).unsqueeze(1).unsqueeze(2)                     # (B, 1, 1, S): True = attend


def tgt_keep(tgt):
    T = tgt.size(1)
    lower = torch.ones(T, T, dtype=torch.bool, device=tgt.device).tril()
    return src_keep(tgt) & lower                                      # (B, 1, T, T)


class MiniTransformer(nn.Module):
    def __init__(self, vocab=VOCAB, d_model=64, n_head=4, d_ff=256, n_layer=2, dropout=0.1, max_len=128):
        super().__init__()
        self.d_model = d_model
        self.src_emb = nn.Embedding(vocab, d_model)
        self.tgt_emb = nn.Embedding(vocab, d_model)
        self.pos = PositionalEncoding(d_model, max_len, dropout)
        self.encoder = nn.ModuleList([EncoderLayer(d_model, n_head, d_ff, dropout) for _ in range(n_layer)])
        self.decoder = nn.ModuleList([DecoderLayer(d_model, n_head, d_ff, dropout) for _ in range(n_layer)])
        self.lm_head = nn.Linear(d_model, vocab)
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):      # scaled up by sqrt(d_model) in encode/decode
            nn.init.normal_(module.weight, mean=0.0, std=self.d_model ** -0.5)

    def encode(self, src, src_mask):
        h = self.pos(self.src_emb(src) * math.sqrt(self.d_model))
        for layer in self.encoder:
            h = layer(h, src_mask)
        return h

    def decode(self, tgt, memory, tgt_mask, src_mask):
        h = self.pos(self.tgt_emb(tgt) * math.sqrt(self.d_model))
        maps = []
        for layer in self.decoder:
            h, cross = layer(h, memory, tgt_mask, src_mask)
            maps.append(cross)
        return h, maps

    def forward(self, src, tgt_in):
        src_mask = src_keep(src)
        h, maps = self.decode(tgt_in, self.encode(src, src_mask), tgt_keep(tgt_in), src_mask)
        return self.lm_head(h), maps


class Trainer:
    def __init__(self, model, lr, warmup, device):
        self.model = model.to(device)
        self.device = device
        self.opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.01)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lambda s: min((s + 1) / warmup, 1.0))

    def step(self, batch_size):
        src, tgt = make_batch(batch_size, device=self.device)
        logits, _ = self.model.forward(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt[:, 1:].reshape(-1), ignore_index=PAD)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.sched.step()
        return loss.item()


def train(model, steps=2000, batch_size=64, lr=1e-3, warmup=100, device='cpu', log_every=250):
    trainer = Trainer(model, lr, warmup, device)
    model.train()
    for step in range(steps):
        loss = trainer.step(batch_size)
        if step % log_every == 0:
            print(f'step {step} loss {loss:.4f}')
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    src_mask = src_keep(src)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)
    maps = []
    for _ in range(max_len - 1):
        h, maps = model.decode(ys, memory, tgt_keep(ys), src_mask)
        nxt = model.lm_head(h[:, -1]).argmax(-1, keepdim=True)
        ys = torch.cat([ys, nxt], dim=1)
        if (nxt == EOS).all():
            break
    return ys, maps
