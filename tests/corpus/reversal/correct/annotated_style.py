# Digit reversal, written the way the annotated-transformer walkthrough lays a model out:
# clones(), a hand-made LayerNorm, SublayerConnection (pre-norm), an EncoderDecoder with a Generator,
# a Batch object that builds its masks, and run_epoch that calls model.forward(...) directly.
# MiniTransformer / train / greedy_decode at the bottom adapt it to the lesson's contract.
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, SOS, EOS = 10, 11, 12
VOCAB = 13


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    lens = torch.randint(min_len, max_len + 1, (batch_size,))
    width = int(lens.max())
    src = torch.full((batch_size, width), PAD, dtype=torch.long)
    tgt = torch.full((batch_size, width + 2), PAD, dtype=torch.long)
    for b in range(batch_size):
        n = int(lens[b])
        digits = torch.randint(0, 10, (n,))
        src[b, :n] = digits
        tgt[b, 0] = SOS
        tgt[b, 1:n + 1] = digits.flip(0)
        tgt[b, n + 1] = EOS
    return src.to(device), tgt.to(device)


def clones(module, N):
    "N identical, independent copies of a module."
    return nn.ModuleList([copy.deepcopy(module) for _ in range(N)])


class LayerNorm(nn.Module):
    "Normalise the last dimension, with a learned gain and bias."

    def __init__(self, features, eps=1e-6):
        super().__init__()
        self.a_2 = nn.Parameter(torch.ones(features))
        self.b_2 = nn.Parameter(torch.zeros(features))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True)
        return self.a_2 * (x - mean) / (std + self.eps) + self.b_2


class SublayerConnection(nn.Module):
    "x + dropout(sublayer(norm(x))): the norm goes first, the residual stays clean."

    def __init__(self, size, dropout):
        super().__init__()
        self.norm = LayerNorm(size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, sublayer):
        return x + self.dropout(sublayer(self.norm(x)))


def attention(query, key, value, mask=None, dropout=None):
    "Scaled dot-product attention; mask is 1 where a key may be seen."
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn


class MultiHeadedAttention(nn.Module):
    def __init__(self, h, d_model, dropout=0.1):
        super().__init__()
        assert d_model % h == 0
        self.d_k = d_model // h
        self.h = h
        self.linears = clones(nn.Linear(d_model, d_model), 4)
        self.attn = None
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        if mask is not None:
            mask = mask.unsqueeze(1)                       # the same mask for every head
        nbatches = query.size(0)
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            for lin, x in zip(self.linears, (query, key, value))
        ]
        x, self.attn = attention(query, key, value, mask=mask, dropout=self.dropout)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        del query, key, value
        return self.linears[-1](x)


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.w_2(self.dropout(self.w_1(x).relu()))


class Embeddings(nn.Module):
    def __init__(self, d_model, vocab):
        super().__init__()
        self.lut = nn.Embedding(vocab, d_model)
        self.d_model = d_model

    def forward(self, x):
        return self.lut(x) * math.sqrt(self.d_model)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[:, : x.size(1)].requires_grad_(False)
        return self.dropout(x)


class EncoderLayer(nn.Module):
    def __init__(self, size, self_attn, feed_forward, dropout):
        super().__init__()
        self.self_attn = self_attn
        self.feed_forward = feed_forward
        self.sublayer = clones(SublayerConnection(size, dropout), 2)
        self.size = size

    def forward(self, x, mask):
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, mask))
        return self.sublayer[1](x, self.feed_forward)


class Encoder(nn.Module):
    def __init__(self, layer, N):
        super().__init__()
        self.layers = clones(layer, N)
        self.norm = LayerNorm(layer.size)

    def forward(self, x, mask):
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


class DecoderLayer(nn.Module):
    def __init__(self, size, self_attn, src_attn, feed_forward, dropout):
        super().__init__()
        self.size = size
        self.self_attn = self_attn
        self.src_attn = src_attn
        self.feed_forward = feed_forward
        self.sublayer = clones(SublayerConnection(size, dropout), 3)

    def forward(self, x, memory, src_mask, tgt_mask):
        m = memory
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, tgt_mask))
        x = self.sublayer[1](x, lambda x: self.src_attn(x, m, m, src_mask))
        return self.sublayer[2](x, self.feed_forward)


class Decoder(nn.Module):
    def __init__(self, layer, N):
        super().__init__()
        self.layers = clones(layer, N)
        self.norm = LayerNorm(layer.size)

    def forward(self, x, memory, src_mask, tgt_mask):
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return self.norm(x)


class Generator(nn.Module):
    "Linear projection to the vocabulary, then log-softmax."

    def __init__(self, d_model, vocab):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab)

    def forward(self, x):
        return F.log_softmax(self.proj(x), dim=-1)


def subsequent_mask(size):
    "True where position i may look at position j (j <= i)."
    attn_shape = (1, size, size)
    future = torch.triu(torch.ones(attn_shape), diagonal=1).type(torch.uint8)
    return future == 0


class Batch:
    "A batch of source and target tokens with their masks."

    def __init__(self, src, tgt=None, pad=PAD):
        self.src = src
        self.src_mask = (src != pad).unsqueeze(-2)
        if tgt is not None:
            self.tgt = tgt[:, :-1]
            self.tgt_y = tgt[:, 1:]
            self.tgt_mask = self.make_std_mask(self.tgt, pad)
            self.ntokens = (self.tgt_y != pad).data.sum()

    @staticmethod
    def make_std_mask(tgt, pad):
        "Hide padding and future words."
        tgt_mask = (tgt != pad).unsqueeze(-2)
        return tgt_mask & subsequent_mask(tgt.size(-1)).type_as(tgt_mask.data).to(tgt.device)


class EncoderDecoder(nn.Module):
    def __init__(self, encoder, decoder, src_embed, tgt_embed, generator):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.src_embed = src_embed
        self.tgt_embed = tgt_embed
        self.generator = generator

    def forward(self, src, tgt, src_mask, tgt_mask):
        return self.decode(self.encode(src, src_mask), src_mask, tgt, tgt_mask)

    def encode(self, src, src_mask):
        return self.encoder(self.src_embed(src), src_mask)

    def decode(self, memory, src_mask, tgt, tgt_mask):
        return self.decoder(self.tgt_embed(tgt), memory, src_mask, tgt_mask)


def make_model(src_vocab, tgt_vocab, N=2, d_model=64, d_ff=256, h=4, dropout=0.1, max_len=64, cls=EncoderDecoder):
    c = copy.deepcopy
    attn = MultiHeadedAttention(h, d_model, dropout)
    ff = PositionwiseFeedForward(d_model, d_ff, dropout)
    position = PositionalEncoding(d_model, dropout, max_len)
    model = cls(
        Encoder(EncoderLayer(d_model, c(attn), c(ff), dropout), N),
        Decoder(DecoderLayer(d_model, c(attn), c(attn), c(ff), dropout), N),
        nn.Sequential(Embeddings(d_model, src_vocab), c(position)),
        nn.Sequential(Embeddings(d_model, tgt_vocab), c(position)),
        Generator(d_model, tgt_vocab),
    )
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    return model


class SimpleLossCompute:
    "Negative log-likelihood of the generator's log-probabilities, summed, with PAD left out."

    def __init__(self, criterion):
        self.criterion = criterion

    def __call__(self, log_probs, y, norm):
        loss = self.criterion(log_probs.contiguous().view(-1, log_probs.size(-1)), y.contiguous().view(-1))
        return loss / norm, loss


def rate(step, model_size, factor, warmup):
    "The Noam schedule: linear warm-up, then decay with the inverse square root of the step."
    if step == 0:
        step = 1
    return factor * (model_size ** (-0.5) * min(step ** (-0.5), step * warmup ** (-1.5)))


def run_epoch(data_iter, model, loss_compute, optimizer, scheduler, accum_iter=1, log_every=200):
    total_tokens, total_loss = 0, 0.0
    for i, batch in enumerate(data_iter):
        out, _ = model.forward(batch.src, batch.tgt, batch.src_mask, batch.tgt_mask)
        loss_node, loss = loss_compute(out, batch.tgt_y, batch.ntokens)
        loss_node.backward()
        if i % accum_iter == 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        scheduler.step()
        total_loss += loss.item()
        total_tokens += int(batch.ntokens)
        if log_every and (i + 1) % log_every == 0:
            print(f"step {i + 1:5d}  loss {loss.item() / int(batch.ntokens):.4f}  "
                  f"lr {optimizer.param_groups[0]['lr']:.2e}")
    return total_loss / max(total_tokens, 1)


# ---- the lesson's contract -------------------------------------------------------------------------------

class MiniTransformer(EncoderDecoder):
    def __init__(self, vocab=VOCAB, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        built = make_model(vocab, vocab, num_layers, d_model, d_ff, h, dropout, max_len)
        super().__init__(built.encoder, built.decoder, built.src_embed, built.tgt_embed, built.generator)
        self.d_model = d_model

    def forward(self, src, tgt, src_mask=None, tgt_mask=None):
        if src_mask is None:
            src_mask = (src != PAD).unsqueeze(-2)
        if tgt_mask is None:
            tgt_mask = Batch.make_std_mask(tgt, PAD)
        out = super().forward(src, tgt, src_mask, tgt_mask)
        maps = [layer.src_attn.attn for layer in self.decoder.layers]
        return self.generator(out), maps


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device).train()
    criterion = nn.NLLLoss(ignore_index=PAD, reduction="sum")
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    # the Noam factor chosen so that the schedule peaks at `lr` when the warm-up ends
    factor = lr * math.sqrt(model.d_model * warmup)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lr_lambda=lambda step: rate(step + 1, model.d_model, factor, warmup))
    batches = (Batch(*make_batch(batch_size, device=device)) for _ in range(steps))
    run_epoch(batches, model, SimpleLossCompute(criterion), optimizer, scheduler, log_every=log_every)
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    src_mask = (src != PAD).unsqueeze(-2)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)
    for _ in range(max_len - 1):
        out = model.decode(memory, src_mask, ys, subsequent_mask(ys.size(1)).to(src.device))
        prob = model.generator(out[:, -1])
        next_word = prob.argmax(dim=1, keepdim=True)
        ys = torch.cat([ys, next_word], dim=1)
        if (next_word == EOS).all():
            break
    maps = [layer.src_attn.attn for layer in model.decoder.layers]
    return ys, maps
