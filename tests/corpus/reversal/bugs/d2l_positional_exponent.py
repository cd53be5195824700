"""Digit reversal in the manner of the Dive-into-Deep-Learning chapters: masks as valid lengths
(masked_softmax fills scores past each row's valid length), DotProductAttention over (batch*heads, q, k)
with bmm, transpose_qkv / transpose_output to fold the heads into the batch, AddNorm, PositionWiseFFN,
an encoder-decoder whose decoder keeps a state of past keys for step-by-step prediction, a masked
softmax cross-entropy loss and a hand-written gradient clipping.

Adapted to the lesson's contract: the decoder's causal valid lengths are made whenever more than one
query is decoded at once (the chapter makes them in training only and predicts one token at a time), and
MiniTransformer / train / greedy_decode wrap the classes.
"""
import math

import torch
from torch import nn

PAD, SOS, EOS = 10, 11, 12
VOCAB = 13


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    lens = torch.randint(min_len, max_len + 1, (batch_size,))
    num_steps = int(lens.max())
    src = torch.full((batch_size, num_steps), PAD, dtype=torch.long)
    tgt = torch.full((batch_size, num_steps + 2), PAD, dtype=torch.long)
    for i in range(batch_size):
        n = int(lens[i])
        x = torch.randint(0, 10, (n,))
        src[i, :n] = x
        tgt[i, 0] = SOS
        tgt[i, 1:n + 1] = torch.flip(x, [0])
        tgt[i, n + 1] = EOS
    return src.to(device), tgt.to(device)


def sequence_mask(X, valid_len, value=0.0):
    """Set the entries of each row of X (rows, cols) at or past its valid length to `value`."""
    cols = X.size(1)
    keep = torch.arange(cols, dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    X[~keep] = value
    return X


def masked_softmax(X, valid_lens):
    """Softmax over the last axis, keys past the valid length masked out.
    valid_lens: None, (batch,) one length per sequence, or (batch, queries) one per query."""
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    # a very negative number rather than -inf: a row with no valid key stays finite
    X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    return nn.functional.softmax(X.reshape(shape), dim=-1)


class DotProductAttention(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.attention_weights = None

    # queries: (batch, q, d), keys: (batch, k, d), values: (batch, k, v), valid_lens: (batch,) or (batch, q)
    def forward(self, queries, keys, values, valid_lens=None):
        d = queries.shape[-1]
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)


def transpose_qkv(X, num_heads):
    """(batch, n, hiddens) -> (batch * heads, n, hiddens / heads)."""
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    X = X.permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def transpose_output(X, num_heads):
    """The inverse of transpose_qkv."""
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


class MultiHeadAttention(nn.Module):
    def __init__(self, num_hiddens, num_heads, dropout, bias=False):
        super().__init__()
        self.num_heads = num_heads
        self.attention = DotProductAttention(dropout)
        self.W_q = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_k = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_v = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)

    def forward(self, queries, keys, values, valid_lens):
        queries = transpose_qkv(self.W_q(queries), self.num_heads)
        keys = transpose_qkv(self.W_k(keys), self.num_heads)
        values = transpose_qkv(self.W_v(values), self.num_heads)
        if valid_lens is not None:
            # one copy of each sequence's lengths per head, in the order transpose_qkv stacked them
            valid_lens = torch.repeat_interleave(valid_lens, repeats=self.num_heads, dim=0)
        output = self.attention(queries, keys, values, valid_lens)
        return self.W_o(transpose_output(output, self.num_heads))


class PositionWiseFFN(nn.Module):
    def __init__(self, ffn_num_hiddens, ffn_num_outputs):
        super().__init__()
        self.dense1 = nn.Linear(ffn_num_outputs, ffn_num_hiddens)
        self.relu = nn.ReLU()
        self.dense2 = nn.Linear(ffn_num_hiddens, ffn_num_outputs)

    def forward(self, X):
        return self.dense2(self.relu(self.dense1(X)))


class AddNorm(nn.Module):
    """The residual connection followed by layer normalisation."""

    def __init__(self, norm_shape, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.ln = nn.LayerNorm(norm_shape)

    def forward(self, X, Y):
        return self.ln(self.dropout(Y) + X)


class PositionalEncoding(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = torch.zeros((1, max_len, num_hiddens))
        X = torch.arange(max_len, dtype=torch.float32).reshape(-1, 1) / torch.pow(
            10000, torch.arange(0, num_hiddens, 2, dtype=torch.float32))
        self.P[:, :, 0::2] = torch.sin(X)
        self.P[:, :, 1::2] = torch.cos(X)

    def forward(self, X):
        X = X + self.P[:, :X.shape[1], :].to(X.device)
        return self.dropout(X)


class TransformerEncoderBlock(nn.Module):
    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, use_bias=False):
        super().__init__()
        self.attention = MultiHeadAttention(num_hiddens, num_heads, dropout, use_bias)
        self.addnorm1 = AddNorm(num_hiddens, dropout)
        self.ffn = PositionWiseFFN(ffn_num_hiddens, num_hiddens)
        self.addnorm2 = AddNorm(num_hiddens, dropout)

    def forward(self, X, valid_lens):
        Y = self.addnorm1(X, self.attention(X, X, X, valid_lens))
        return self.addnorm2(Y, self.ffn(Y))


class TransformerEncoder(nn.Module):
    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout, max_len):
        super().__init__()
        self.num_hiddens = num_hiddens
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.pos_encoding = PositionalEncoding(num_hiddens, dropout, max_len)
        self.blks = nn.Sequential()
        for i in range(num_blks):
            self.blks.add_module("block" + str(i), TransformerEncoderBlock(
                num_hiddens, ffn_num_hiddens, num_heads, dropout))

    def forward(self, X, valid_lens):
        # the embeddings are scaled up before the positions (values in [-1, 1]) are added
        X = self.pos_encoding(self.embedding(X) * math.sqrt(self.num_hiddens))
        for blk in self.blks:
            X = blk(X, valid_lens)
        return X


class TransformerDecoderBlock(nn.Module):
    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, i):
        super().__init__()
        self.i = i
        self.attention1 = MultiHeadAttention(num_hiddens, num_heads, dropout)
        self.addnorm1 = AddNorm(num_hiddens, dropout)
        self.attention2 = MultiHeadAttention(num_hiddens, num_heads, dropout)
        self.addnorm2 = AddNorm(num_hiddens, dropout)
        self.ffn = PositionWiseFFN(ffn_num_hiddens, num_hiddens)
        self.addnorm3 = AddNorm(num_hiddens, dropout)

    def forward(self, X, state):
        enc_outputs, enc_valid_lens = state[0], state[1]
        past = state[2][self.i]
        key_values = X if past is None else torch.cat((past, X), dim=1)
        state[2][self.i] = key_values
        batch_size, num_steps, _ = X.shape
        if num_steps > 1:
            # query t (counting the cached ones) may see keys 0..t: valid lengths past+1 .. past+num_steps
            start = 0 if past is None else past.shape[1]
            dec_valid_lens = torch.arange(start + 1, start + num_steps + 1, device=X.device).repeat(batch_size, 1)
        else:
            dec_valid_lens = None          # one new query: every cached key is in its past
        X2 = self.attention1(X, key_values, key_values, dec_valid_lens)
        Y = self.addnorm1(X, X2)
        Y2 = self.attention2(Y, enc_outputs, enc_outputs, enc_valid_lens)
        Z = self.addnorm2(Y, Y2)
        return self.addnorm3(Z, self.ffn(Z)), state


class TransformerDecoder(nn.Module):
    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout, max_len):
        super().__init__()
        self.num_hiddens = num_hiddens
        self.num_blks = num_blks
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.pos_encoding = PositionalEncoding(num_hiddens, dropout, max_len)
        self.blks = nn.Sequential()
        for i in range(num_blks):
            self.blks.add_module("block" + str(i), TransformerDecoderBlock(
                num_hiddens, ffn_num_hiddens, num_heads, dropout, i))
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def init_state(self, enc_outputs, enc_valid_lens):
        return [enc_outputs, enc_valid_lens, [None] * self.num_blks]

    def forward(self, X, state):
        offset = 0 if state[2][0] is None else state[2][0].shape[1]
        X = self.embedding(X) * math.sqrt(self.num_hiddens)
        X = self.pos_encoding.dropout(X + self.pos_encoding.P[:, offset:offset + X.shape[1], :].to(X.device))
        self._attention_weights = [None] * len(self.blks)
        for i, blk in enumerate(self.blks):
            X, state = blk(X, state)
            self._attention_weights[i] = blk.attention2.attention.attention_weights
        return self.dense(X), state

    @property
    def attention_weights(self):
        return self._attention_weights


class EncoderDecoder(nn.Module):
    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, enc_X, dec_X, enc_valid_lens):
        enc_outputs = self.encoder(enc_X, enc_valid_lens)
        dec_state = self.decoder.init_state(enc_outputs, enc_valid_lens)
        return self.decoder(dec_X, dec_state)[0]


def valid_length(X):
    return (X != PAD).type(torch.int32).sum(1)


# ---- the lesson's contract -------------------------------------------------------------------------------

class MiniTransformer(EncoderDecoder):
    def __init__(self, vocab=VOCAB, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        super().__init__(
            TransformerEncoder(vocab, d_model, d_ff, h, num_layers, dropout, max_len),
            TransformerDecoder(vocab, d_model, d_ff, h, num_layers, dropout, max_len))
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)

    def forward(self, src, tgt):
        logits = super().forward(src, tgt, valid_length(src))
        heads = self.decoder.blks[0].attention2.num_heads
        maps = [w.reshape(src.size(0), heads, tgt.size(1), src.size(1))
                for w in self.decoder.attention_weights]
        return logits, maps


class MaskedSoftmaxCELoss(nn.CrossEntropyLoss):
    """Cross-entropy per token, tokens past each sequence's valid length weighted 0."""

    # pred: (batch, steps, vocab), label: (batch, steps), valid_len: (batch,)
    def forward(self, pred, label, valid_len):
        weights = torch.ones_like(label, dtype=torch.float32)
        weights = sequence_mask(weights, valid_len)
        self.reduction = 'none'
        unweighted_loss = super().forward(pred.permute(0, 2, 1), label)
        return (unweighted_loss * weights).mean(dim=1)


def grad_clipping(net, theta):
    params = [p for p in net.parameters() if p.requires_grad and p.grad is not None]
    norm = torch.sqrt(sum(torch.sum(p.grad ** 2) for p in params))
    if norm > theta:
        for param in params:
            param.grad[:] *= theta / norm


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup))
    loss = MaskedSoftmaxCELoss()
    for step in range(steps):
        X, tgt = make_batch(batch_size, device=device)
        Y = tgt[:, 1:]
        Y_valid_len = valid_length(Y)
        bos = torch.tensor([SOS] * Y.shape[0], device=device).reshape(-1, 1)
        dec_input = torch.cat([bos, Y[:, :-1]], 1)            # teacher forcing
        Y_hat, _ = model(X, dec_input)
        optimizer.zero_grad()
        l = loss(Y_hat, Y, Y_valid_len)
        l.sum().backward()
        grad_clipping(model, 1)
        optimizer.step()
        scheduler.step()
        if log_every and step % log_every == 0:
            print(f"step {step}, loss {float(l.sum() / Y_valid_len.sum()):.3f}")
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    enc_valid_len = valid_length(src)
    enc_outputs = model.encoder(src, enc_valid_len)
    dec_state = model.decoder.init_state(enc_outputs, enc_valid_len)
    dec_X = torch.full((src.shape[0], 1), SOS, dtype=torch.long, device=src.device)
    ys = [dec_X]
    for _ in range(max_len - 1):
        Y, dec_state = model.decoder(dec_X, dec_state)
        dec_X = Y.argmax(dim=2)
        ys.append(dec_X)
        if (dec_X == EOS).all():
            break
    heads = model.decoder.blks[0].attention2.num_heads
    maps = [w.reshape(src.size(0), heads, -1, src.size(1)) for w in model.decoder.attention_weights]
    return torch.cat(ys, dim=1), maps
