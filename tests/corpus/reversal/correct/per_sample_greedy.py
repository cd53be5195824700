# Reversal transformer, TF-tutorial naming; greedy_decode decodes each
# sequence on its own, without its padding.
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

# --- tokens ---------------------------------------------------------------
PAD, SOS, EOS = 10, 11, 12
VOCAB = 13


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    lengths = torch.randint(min_len, max_len + 1, size=(batch_size,))
    maxlen = lengths.max().item()
    src = torch.full((batch_size, maxlen), PAD, dtype=torch.int64)
    tgt = torch.full((batch_size, maxlen + 2), PAD, dtype=torch.int64)
    for b, n in enumerate(lengths):
        digits = torch.randint(0, 10, (n,))
        src[b, :n] = digits
        tgt[b, 0] = SOS
        tgt[b, 1:n + 1] = digits.flip(dims=(0,))
        tgt[b, n + 1] = EOS
    return src.to(device), tgt.to(device)


# --- building blocks --------------------------------------------------------
class LayerNorm(nn.Module):
    """My own layer norm (written for the exercise): normalise each token's features."""

    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(d))
        self.beta = nn.Parameter(torch.zeros(d))
        self.eps = eps

    def forward(self, x):
        mu = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        return self.gamma * (x - mu) / torch.sqrt(var + self.eps) + self.beta


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        position = torch.arange(max_len).float().unsqueeze(-1)
        exponent = torch.arange(0, d_model, 2).float() / d_model
        angle = position / (10000.0 ** exponent)
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = angle.sin()
        pe[:, 1::2] = angle.cos()
        self.register_buffer('pe', pe)

    def forward(self, x):
        T = x.size(1)
        return self.dropout(x + self.pe[:T])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.num_heads = num_heads
        self.depth = d_model // num_heads
        self.wq = nn.Linear(d_model, d_model)
        self.wk = nn.Linear(d_model, d_model)
        self.wv = nn.Linear(d_model, d_model)
        self.dense = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def split_heads(self, x, batch_size):
        x = x.reshape(batch_size, -1, self.num_heads, self.depth)
        return x.permute(0, 2, 1, 3)

    def forward(self, q, k, v, mask=None):
        batch_size = q.size(0)
        q = self.split_heads(self.wq(q), batch_size)
        k = self.split_heads(self.wk(k), batch_size)
        v = self.split_heads(self.wv(v), batch_size)
        matmul_qk = torch.matmul(q, k.transpose(-1, -2))
        scaled = matmul_qk / math.sqrt(self.depth)
        if mask is not None:
            scaled = scaled + (~mask) * -1e9              # mask: True = keep
        attention_weights = F.softmax(scaled, dim=-1)
        output = torch.matmul(self.dropout(attention_weights), v)
        output = output.permute(0, 2, 1, 3).reshape(batch_size, -1, self.num_heads * self.depth)
        return self.dense(output), attention_weights


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
        self.mha = MultiHeadAttention(d_model, h, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.layernorm1 = LayerNorm(d_model)
        self.layernorm2 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        attn_output, _ = self.mha(x, x, x, mask)
        out1 = self.layernorm1(x + self.dropout1(attn_output))
        ffn_output = self.ffn(out1)
        return self.layernorm2(out1 + self.dropout2(ffn_output))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.mha1 = MultiHeadAttention(d_model, h, dropout)
        self.mha2 = MultiHeadAttention(d_model, h, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.layernorm1 = LayerNorm(d_model)
        self.layernorm2 = LayerNorm(d_model)
        self.layernorm3 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        attn1, _ = self.mha1(x, x, x, tgt_mask)
        out1 = self.layernorm1(x + self.dropout1(attn1))
        attn2, block2 = self.mha2(out1, memory, memory, src_mask)
        out2 = self.layernorm2(out1 + self.dropout2(attn2))
        ffn_output = self.ffn(out2)
        out3 = self.layernorm3(out2 + self.dropout3(ffn_output))
        return out3, block2


def padding_mask(x, pad=PAD):
    return (x != pad).unsqueeze(1).unsqueeze(2)


def target_mask(x, pad=PAD):
    size = x.size(1)
    look_ahead = torch.tril(torch.ones(size, size, device=x.device)).bool()
    return padding_mask(x, pad) & look_ahead


# --- model -----------------------------------------------------------------
class MiniTransformer(nn.Module):
    def __init__(self, vocab=13, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        super().__init__()
        self.d_model = d_model
        self.enc_embedding = nn.Embedding(vocab, d_model)
        self.dec_embedding = nn.Embedding(vocab, d_model)
        self.pos_encoding = PositionalEncoding(d_model, max_len, dropout)
        self.enc_layers = nn.ModuleList([EncoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.dec_layers = nn.ModuleList([DecoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.generator = nn.Linear(d_model, vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        # start from a uniform prediction: loss at step 0 is exactly log(vocab)
        nn.init.zeros_(self.generator.weight)
        nn.init.zeros_(self.generator.bias)

    def encode(self, src, src_mask):
        x = self.enc_embedding(src) * math.sqrt(self.d_model)
        x = self.pos_encoding(x)
        for layer in self.enc_layers:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, tgt_mask, src_mask):
        x = self.dec_embedding(tgt) * math.sqrt(self.d_model)
        x = self.pos_encoding(x)
        attention_maps = []
        for layer in self.dec_layers:
            x, block2 = layer(x, memory, tgt_mask, src_mask)
            attention_maps.append(block2)
        return x, attention_maps

    def forward(self, src, tgt_in):
        enc_padding_mask = padding_mask(src)
        combined_mask = target_mask(tgt_in)
        enc_output = self.encode(src, enc_padding_mask)
        dec_output, attention_maps = self.decode(tgt_in, enc_output, combined_mask, enc_padding_mask)
        return self.generator(dec_output), attention_maps


# --- training ----------------------------------------------------------------
def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup))
    loss_object = nn.CrossEntropyLoss(reduction='none')
    for step in range(steps):
        inp, tar = make_batch(batch_size, device=device)
        tar_inp = tar[:, :-1]
        tar_real = tar[:, 1:]
        predictions, _ = model(inp, tar_inp)
        per_token = loss_object(predictions.reshape(-1, VOCAB), tar_real.reshape(-1))
        keep = (tar_real.reshape(-1) != PAD).float()
        loss = (per_token * keep).sum() / keep.sum()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        if step % log_every == 0:
            print(f'Step {step} Loss {loss.item():.4f}')
    return model


def _decode_one(model, src_row, max_len):
    """Greedy decoding of ONE source sequence (1, S); stops at its own EOS."""
    enc_padding_mask = padding_mask(src_row)
    enc_output = model.encode(src_row, enc_padding_mask)
    tokens = [SOS]
    attention_maps = []
    for _ in range(max_len - 1):
        ys = torch.tensor([tokens], device=src_row.device)
        dec_output, attention_maps = model.decode(ys, enc_output, target_mask(ys), enc_padding_mask)
        next_id = int(model.generator(dec_output[0, -1]).argmax())
        tokens.append(next_id)
        if next_id == EOS:
            break
    return tokens, attention_maps


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    """One sequence at a time (simpler to reason about); rows padded with PAD."""
    model.eval()
    results, maps = [], []
    for b in range(src.size(0)):
        row = src[b:b + 1]
        row = row[:, : int((row != PAD).sum())] if (row != PAD).any() else row
        toks, maps_b = _decode_one(model, row, max_len)
        results.append(toks)
        maps.append(maps_b)
    width = max(len(t) for t in results)
    out = torch.full((src.size(0), width), PAD, dtype=torch.long, device=src.device)
    for b, toks in enumerate(results):
        out[b, :len(toks)] = torch.tensor(toks, device=src.device)
    return out, maps[-1]
