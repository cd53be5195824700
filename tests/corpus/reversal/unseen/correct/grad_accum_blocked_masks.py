# Reverse-a-sequence transformer.
# Conventions in this file:
#   * masks are "blocked" masks: True means "may NOT attend" (same as PyTorch's attn_mask).
#   * q, k, v come out of a single fused projection when they share an input.
#   * train() accumulates gradients over micro-batches (my laptop can't do batch 64 fast),
#     so the effective batch is still batch_size.
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, SOS, EOS = 10, 11, 12
VOCAB = 13
MICRO_BATCHES = 2


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    lens = torch.randint(min_len, max_len + 1, (batch_size,))
    T = int(lens.max())
    src = torch.full((batch_size, T), PAD, dtype=torch.long)
    tgt = torch.full((batch_size, T + 2), PAD, dtype=torch.long)
    for i in range(batch_size):
        L = int(lens[i])
        seq = torch.randint(0, 10, (L,))
        src[i, :L] = seq
        tgt[i, 0] = SOS
        tgt[i, 1:L + 1] = seq.flip(0)
        tgt[i, L + 1] = EOS
    return src.to(device), tgt.to(device)


def padding_mask(x, pad=PAD):
    """(B, T) -> (B, 1, 1, T); True where the key is padding (blocked)."""
    return (x == pad).unsqueeze(1).unsqueeze(2)


def target_mask(x, pad=PAD):
    """(B, T) -> (B, 1, T, T); True where blocked: padding OR in the future."""
    T = x.size(1)
    future = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
    return padding_mask(x, pad) | future[None, None]


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(max_len, dtype=torch.float).unsqueeze(1)
        div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div)
        pe[:, 1::2] = torch.cos(position * div)
        self.register_buffer('pe', pe.unsqueeze(0))

    def forward(self, x):
        return self.dropout(x + self.pe[:, :x.size(1)])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.h = num_heads
        self.d_k = d_model // num_heads
        self.d_model = d_model
        self.qkv = nn.Linear(d_model, 3 * d_model)     # fused projection
        self.proj = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def _heads(self, x):
        B, T, _ = x.shape
        return x.view(B, T, self.h, self.d_k).transpose(1, 2)

    def forward(self, q, k, v, mask=None):
        B, Tq, _ = q.shape
        if q is k and k is v:                           # self-attention: one matmul
            Q, K, V = self.qkv(q).split(self.d_model, dim=-1)
        else:                                           # cross-attention: slice the fused weight
            W_q, W_k, W_v = self.qkv.weight.split(self.d_model, dim=0)
            b_q, b_k, b_v = self.qkv.bias.split(self.d_model, dim=0)
            Q, K, V = F.linear(q, W_q, b_q), F.linear(k, W_k, b_k), F.linear(v, W_v, b_v)
        Q, K, V = self._heads(Q), self._heads(K), self._heads(V)
        scores = Q @ K.transpose(-2, -1) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(mask, -1e9)    # True = blocked
        attn = scores.softmax(dim=-1)
        out = self.dropout(attn) @ V
        out = out.transpose(1, 2).reshape(B, Tq, self.d_model)
        return self.proj(out), attn


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.fc2(self.dropout(F.relu(self.fc1(x))))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        attn_out, _ = self.self_attn(x, x, x, mask)
        x = self.norm1(x + self.dropout(attn_out))
        x = self.norm2(x + self.dropout(self.ffn(x)))
        return x


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout)
        self.cross_attn = MultiHeadAttention(d_model, h, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        attn_out, _ = self.self_attn(x, x, x, tgt_mask)
        x = self.norm1(x + self.dropout(attn_out))
        cross_out, cross = self.cross_attn(x, memory, memory, src_mask)
        x = self.norm2(x + self.dropout(cross_out))
        x = self.norm3(x + self.dropout(self.ffn(x)))
        return x, cross


class MiniTransformer(nn.Module):
    def __init__(self, vocab=VOCAB, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1,
                 max_len=64):
        super().__init__()
        self.d_model = d_model
        self.src_embedding = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.tgt_embedding = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.positional = PositionalEncoding(d_model, max_len, dropout)
        self.encoder_layers = nn.ModuleList(
            [EncoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.decoder_layers = nn.ModuleList(
            [DecoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.generator = nn.Linear(d_model, vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src, src_mask):
        x = self.positional(self.src_embedding(src) * math.sqrt(self.d_model))
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, tgt_mask, src_mask):
        x = self.positional(self.tgt_embedding(tgt) * math.sqrt(self.d_model))
        cross_maps = []
        for layer in self.decoder_layers:
            x, cross = layer(x, memory, tgt_mask, src_mask)
            cross_maps.append(cross)
        return x, cross_maps

    def forward(self, src, tgt_in):
        src_mask = padding_mask(src)
        memory = self.encode(src, src_mask)
        out, maps = self.decode(tgt_in, memory, target_mask(tgt_in), src_mask)
        return self.generator(out), maps


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, 1.0))
    micro = max(1, batch_size // MICRO_BATCHES)
    for step in range(1, steps + 1):
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for _ in range(MICRO_BATCHES):
            src, tgt = make_batch(micro, device=device)
            logits, _ = model(src, tgt[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1),
                                   ignore_index=PAD)
            (loss / MICRO_BATCHES).backward()
            total += loss.item() / MICRO_BATCHES
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        if step % log_every == 0 or step == 1:
            print(f"step {step:5d}  loss {total:.4f}  lr {scheduler.get_last_lr()[0]:.2e}")
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
        next_token = model.generator(out[:, -1]).argmax(dim=-1, keepdim=True)
        ys = torch.cat([ys, next_token], dim=1)
        if (next_token == EOS).all():
            break
    return ys, maps
