"""Digit reversal in the minGPT / nanoGPT manner: a config dataclass, CausalSelfAttention with a registered
lower-triangular buffer and one fused qkv projection (c_attn), heads made by view/transpose, a flash branch
through scaled_dot_product_attention, pre-norm Blocks with a GELU MLP, learned position embeddings, the
0.02 normal init with the residual projections scaled by depth, decay/no-decay parameter groups and a
warm-up + cosine learning rate set by hand each iteration.

GPT is decoder-only; for the lesson's encoder-decoder the encoder reuses Block without the causal mask and
the decoder's blocks get a cross-attention sublayer. MiniTransformer / train / greedy_decode keep the
lesson's contract.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F

PAD, SOS, EOS = 10, 11, 12
VOCAB = 13


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    lens = torch.randint(min_len, max_len + 1, (batch_size,))
    T = int(lens.max())
    src = torch.full((batch_size, T), PAD, dtype=torch.long)
    tgt = torch.full((batch_size, T + 2), PAD, dtype=torch.long)
    for i, L in enumerate(lens.tolist()):
        seq = torch.randint(0, 10, (L,))
        src[i, :L] = seq
        tgt[i, 0] = SOS
        tgt[i, 1:L + 1] = seq.flip(0)
        tgt[i, L + 1] = EOS
    return src.to(device), tgt.to(device)


@dataclass
class GPTConfig:
    block_size: int = 64
    vocab_size: int = VOCAB
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    n_inner: int = 256
    dropout: float = 0.1
    bias: bool = True


class SelfAttention(nn.Module):
    """Self-attention; causal=True gives the GPT CausalSelfAttention (a query sees keys up to its own)."""

    def __init__(self, config, causal):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        self.causal = causal
        self.flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention')
        self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                             .view(1, 1, config.block_size, config.block_size))

    def forward(self, x, key_padding=None):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        # key_padding: (B, T) True at PAD keys (the encoder's source); the decoder's PAD keys are all
        # after its real tokens, so the causal mask already keeps them from every real query
        keep = None if key_padding is None else ~key_padding[:, None, None, :]
        if self.flash:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep,
                                               dropout_p=self.dropout if self.training else 0,
                                               is_causal=self.causal and keep is None)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            if self.causal:
                att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
            if keep is not None:
                att = att.masked_fill(~keep, -1e9)
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class CrossAttention(nn.Module):
    """Queries from the decoder, keys and values from the encoder's output (one fused kv projection)."""

    def __init__(self, config):
        super().__init__()
        self.c_q = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.c_kv = nn.Linear(config.n_embd, 2 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.last_att = None

    def forward(self, x, memory, memory_padding):
        B, T, C = x.size()
        S = memory.size(1)
        hs = C // self.n_head
        q = self.c_q(x).view(B, T, self.n_head, hs).transpose(1, 2)
        k, v = self.c_kv(memory).split(self.n_embd, dim=2)
        k = k.view(B, S, self.n_head, hs).transpose(1, 2)
        v = v.view(B, S, self.n_head, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        # a finite fill: a source that is all PAD leaves a row with no key, uniform rather than NaN
        att = att.masked_fill(memory_padding[:, None, None, :], -1e9)
        att = F.softmax(att, dim=-1)
        self.last_att = att.detach()
        y = self.attn_dropout(att) @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, config.n_inner, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(config.n_inner, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config, causal=False, cross=False):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = SelfAttention(config, causal)
        self.ln_x = nn.LayerNorm(config.n_embd, bias=config.bias) if cross else None
        self.xattn = CrossAttention(config) if cross else None
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x, key_padding=None, memory=None, memory_padding=None):
        x = x + self.attn(self.ln_1(x), key_padding)
        if self.xattn is not None:
            x = x + self.xattn(self.ln_x(x), memory, memory_padding)
        x = x + self.mlp(self.ln_2(x))
        return x


class GPTSeq2Seq(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            enc=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_e=nn.LayerNorm(config.n_embd, bias=config.bias),
            dec=nn.ModuleList([Block(config, causal=True, cross=True) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight      # weight tying
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith('c_proj.weight'):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def embed(self, idx):
        t = idx.size(1)
        assert t <= self.config.block_size, f"sequence of {t} is longer than block_size"
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        return self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))

    def encode(self, src):
        x = self.embed(src)
        pad = src == PAD
        for block in self.transformer.enc:
            x = block(x, key_padding=pad)
        return self.transformer.ln_e(x), pad

    def decode(self, idx, memory, memory_padding):
        x = self.embed(idx)
        for block in self.transformer.dec:
            x = block(x, memory=memory, memory_padding=memory_padding)
        return self.lm_head(self.transformer.ln_f(x))

    def forward(self, src, idx, targets=None):
        memory, pad = self.encode(src)
        logits = self.decode(idx, memory, pad)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=PAD)
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [
            {'params': decay_params, 'weight_decay': weight_decay},
            {'params': nodecay_params, 'weight_decay': 0.0},
        ]
        return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)

    @torch.no_grad()
    def generate(self, src, max_new_tokens):
        memory, pad = self.encode(src)
        idx = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.config.block_size else idx[:, -self.config.block_size:]
            logits = self.decode(idx_cond, memory, pad)
            idx_next = logits[:, -1, :].argmax(dim=-1, keepdim=True)
            idx = torch.cat((idx, idx_next), dim=1)
            if (idx_next == EOS).all():
                break
        return idx


# ---- the lesson's contract -------------------------------------------------------------------------------

class MiniTransformer(GPTSeq2Seq):
    def __init__(self, vocab=VOCAB, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        super().__init__(GPTConfig(block_size=max_len, vocab_size=vocab, n_layer=num_layers, n_head=h,
                                   n_embd=d_model, n_inner=d_ff, dropout=dropout))


def get_lr(it, learning_rate, warmup_iters, lr_decay_iters, min_lr):
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device).train()
    optimizer = model.configure_optimizers(weight_decay=0.1, learning_rate=lr, betas=(0.9, 0.95))
    for iter_num in range(steps):
        now = get_lr(iter_num, lr, warmup, max(steps, warmup + 1), lr / 10)
        for param_group in optimizer.param_groups:
            param_group['lr'] = now
        src, tgt = make_batch(batch_size, device=device)
        X, Y = tgt[:, :-1], tgt[:, :-1]
        logits, loss = model(src, X, Y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if log_every and iter_num % log_every == 0:
            print(f"iter {iter_num}: loss {loss.item():.4f}, lr {now:.2e}")
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    return model.generate(src, max_len - 1), None
