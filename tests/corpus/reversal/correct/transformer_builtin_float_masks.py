# Digit reversal with a small encoder-decoder transformer.
import functools
import logging
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, SOS, EOS = 10, 11, 12
VOCAB = 13


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    lengths = torch.randint(min_len, max_len + 1, (batch_size,)).tolist()
    width = max(lengths)
    src = torch.full((batch_size, width), PAD, dtype=torch.long)
    tgt = torch.full((batch_size, width + 2), PAD, dtype=torch.long)
    for row, n in enumerate(lengths):
        digits = torch.randint(0, 10, (n,))
        src[row, :n] = digits
        tgt[row, 0] = SOS
        tgt[row, 1:n + 1] = torch.flip(digits, dims=[0])
        tgt[row, n + 1] = EOS
    return src.to(device), tgt.to(device)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        position = torch.arange(max_len, dtype=torch.float32)[:, None]
        freq = torch.pow(10000.0, -torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
        table = torch.zeros(max_len, d_model)
        table[:, 0::2] = torch.sin(position * freq)
        table[:, 1::2] = torch.cos(position * freq)
        self.register_buffer("table", table)

    def forward(self, x):
        return self.drop(x + self.table[: x.shape[1]])


class MiniTransformer(nn.Module):
    """Encoder-decoder on PyTorch's nn.Transformer; masks are additive floats (0 or -inf)."""

    def __init__(self, vocab=VOCAB, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        super().__init__()
        self.d_model = d_model
        self.src_emb = nn.Embedding(vocab, d_model)
        self.tgt_emb = nn.Embedding(vocab, d_model)
        self.pos = PositionalEncoding(d_model, max_len, dropout)
        self.core = nn.Transformer(d_model, h, num_layers, num_layers, d_ff, dropout, batch_first=True)
        self.generator = nn.Linear(d_model, vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    @staticmethod
    def pad_bias(tokens):
        """(B, T) -> (B, T) float: -inf at PAD keys, 0 elsewhere."""
        return torch.zeros(tokens.shape, device=tokens.device).masked_fill(tokens == PAD, float("-inf"))

    def encode(self, src, src_mask=None):
        x = self.pos(self.src_emb(src) * math.sqrt(self.d_model))
        return self.core.encoder(x, src_key_padding_mask=self.pad_bias(src))

    def decode(self, tgt, memory, tgt_mask=None, src_mask=None, src=None):
        x = self.pos(self.tgt_emb(tgt) * math.sqrt(self.d_model))
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], device=tgt.device)
        memory_bias = None if src is None else self.pad_bias(src)
        out = self.core.decoder(x, memory, tgt_mask=causal, memory_key_padding_mask=memory_bias)
        return out, None

    def forward(self, src, tgt):
        memory = self.encode(src)
        out, _ = self.decode(tgt, memory, src=src)
        return self.generator(out), None


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / warmup, 1.0))
    for step in range(1, steps + 1):
        src, tgt = make_batch(batch_size, device=device)
        logits, _ = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1), ignore_index=PAD)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    memory = model.encode(src)
    ys = torch.full((src.shape[0], 1), SOS, dtype=torch.long, device=src.device)
    for _ in range(max_len - 1):
        out, _ = model.decode(ys, memory, src=src)
        nxt = model.generator(out[:, -1]).argmax(-1, keepdim=True)
        ys = torch.cat([ys, nxt], dim=1)
        if (nxt == EOS).all():
            break
    return ys, None
