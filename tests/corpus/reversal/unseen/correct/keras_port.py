# Ported from my Keras version of this assignment. I kept the Keras habits:
# layers get "units", a Model has compile()/fit(), and train() just calls fit().
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, SOS, EOS = 10, 11, 12
VOCAB = 13


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    # numpy first (like a tf.data generator), tensors at the end
    lens = np.random.randint(min_len, max_len + 1, size=batch_size)
    maxlen = int(lens.max())
    x = np.full((batch_size, maxlen), PAD, dtype=np.int64)
    y = np.full((batch_size, maxlen + 2), PAD, dtype=np.int64)
    for i, n in enumerate(lens):
        seq = np.random.randint(0, 10, size=n)
        x[i, :n] = seq
        y[i, 0] = SOS
        y[i, 1:n + 1] = seq[::-1]
        y[i, n + 1] = EOS
    return torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)


class Dense(nn.Linear):
    """keras.layers.Dense(units) look-alike with glorot_uniform kernel init."""

    def __init__(self, input_dim, units, activation=None):
        super().__init__(input_dim, units)
        self.activation = activation
        nn.init.xavier_uniform_(self.weight)
        nn.init.zeros_(self.bias)

    def forward(self, inputs):
        out = super().forward(inputs)
        return self.activation(out) if self.activation is not None else out


def padding_mask(x, pad=PAD):
    return (x != pad)[:, None, None, :]


def target_mask(x, pad=PAD):
    seq_len = x.shape[1]
    look_ahead = torch.tril(torch.ones(seq_len, seq_len, device=x.device)) > 0.5
    return padding_mask(x, pad) & look_ahead


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        # the TF tutorial's get_angles(), done with numpy
        pos = np.arange(max_len)[:, np.newaxis]
        i = np.arange(d_model)[np.newaxis, :]
        angle_rates = 1 / np.power(10000, (2 * (i // 2)) / np.float32(d_model))
        angle_rads = pos * angle_rates
        angle_rads[:, 0::2] = np.sin(angle_rads[:, 0::2])
        angle_rads[:, 1::2] = np.cos(angle_rads[:, 1::2])
        self.register_buffer('pos_encoding', torch.tensor(angle_rads[np.newaxis], dtype=torch.float32))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        seq_len = x.shape[1]
        return self.dropout(x + self.pos_encoding[:, :seq_len, :])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.num_heads = num_heads
        self.d_model = d_model
        self.depth = d_model // num_heads
        self.wq = Dense(d_model, d_model)
        self.wk = Dense(d_model, d_model)
        self.wv = Dense(d_model, d_model)
        self.dense = Dense(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def split_heads(self, x, batch_size):
        x = x.reshape(batch_size, -1, self.num_heads, self.depth)
        return x.permute(0, 2, 1, 3)

    def call(self, v, k, q, mask):
        # Keras argument order (v, k, q)
        batch_size = q.shape[0]
        q = self.split_heads(self.wq(q), batch_size)
        k = self.split_heads(self.wk(k), batch_size)
        v = self.split_heads(self.wv(v), batch_size)
        matmul_qk = torch.matmul(q, k.transpose(-1, -2))
        scaled = matmul_qk / math.sqrt(self.depth)
        if mask is not None:
            scaled = scaled + (~mask).float() * -1e9
        weights = F.softmax(scaled, dim=-1)
        output = torch.matmul(self.dropout(weights), v)
        output = output.permute(0, 2, 1, 3).reshape(batch_size, -1, self.d_model)
        return self.dense(output), weights

    def forward(self, q, k, v, mask=None):
        return self.call(v, k, q, mask)


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.hidden = Dense(d_model, d_ff, activation=F.relu)
        self.drop = nn.Dropout(dropout)
        self.out = Dense(d_ff, d_model)

    def forward(self, x):
        return self.out(self.drop(self.hidden(x)))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.mha = MultiHeadAttention(d_model, h, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.layernorm1 = nn.LayerNorm(d_model, eps=1e-6)
        self.layernorm2 = nn.LayerNorm(d_model, eps=1e-6)
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
        self.layernorm1 = nn.LayerNorm(d_model, eps=1e-6)
        self.layernorm2 = nn.LayerNorm(d_model, eps=1e-6)
        self.layernorm3 = nn.LayerNorm(d_model, eps=1e-6)
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


class MiniTransformer(nn.Module):
    def __init__(self, vocab=VOCAB, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        super().__init__()
        self.d_model = d_model
        self.num_layers = num_layers
        self.enc_embedding = nn.Embedding(vocab, d_model)
        self.dec_embedding = nn.Embedding(vocab, d_model)
        nn.init.xavier_uniform_(self.enc_embedding.weight)
        nn.init.xavier_uniform_(self.dec_embedding.weight)
        self.pos_encoding = PositionalEncoding(d_model, max_len, dropout)
        self.enc_layers = nn.ModuleList([EncoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.dec_layers = nn.ModuleList([DecoderLayer(d_model, h, d_ff, dropout) for _ in range(num_layers)])
        self.generator = Dense(d_model, vocab)
        self.optimizer = None
        self.loss_fn = None

    def encode(self, src, src_mask):
        x = self.enc_embedding(src) * math.sqrt(self.d_model)
        x = self.pos_encoding(x)
        for i in range(self.num_layers):
            x = self.enc_layers[i](x, src_mask)
        return x

    def decode(self, tgt, memory, tgt_mask, src_mask):
        x = self.dec_embedding(tgt) * math.sqrt(self.d_model)
        x = self.pos_encoding(x)
        attention_weights = []
        for i in range(self.num_layers):
            x, block2 = self.dec_layers[i](x, memory, tgt_mask, src_mask)
            attention_weights.append(block2)
        return x, attention_weights

    def forward(self, src, tgt_in):
        enc_padding_mask = padding_mask(src)
        enc_output = self.encode(src, enc_padding_mask)
        dec_output, attention_weights = self.decode(tgt_in, enc_output, target_mask(tgt_in),
                                                    enc_padding_mask)
        return self.generator(dec_output), attention_weights

    # ---- Keras-ish API -------------------------------------------------
    def compile(self, lr=1e-3, warmup=400):
        self.optimizer = torch.optim.Adam(self.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: min((step + 1) / warmup, 1.0))
        self.loss_fn = nn.CrossEntropyLoss(ignore_index=PAD)

    def train_step(self, src, tgt):
        tar_inp = tgt[:, :-1]
        tar_real = tgt[:, 1:]
        predictions, _ = self(src, tar_inp)
        loss = self.loss_fn(predictions.reshape(-1, predictions.shape[-1]), tar_real.reshape(-1))
        self.optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.parameters(), 1.0)
        self.optimizer.step()
        self.scheduler.step()
        return loss.item()

    def fit(self, steps, batch_size, device='cpu', verbose_every=200):
        self.train()
        history = {'loss': []}
        for step in range(1, steps + 1):
            src, tgt = make_batch(batch_size, device=device)
            history['loss'].append(self.train_step(src, tgt))
            if step == 1 or step % verbose_every == 0:
                print(f"Epoch-step {step}: loss: {history['loss'][-1]:.4f}")
        return history


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device)
    model.compile(lr=lr, warmup=warmup)
    model.fit(steps, batch_size, device=device, verbose_every=log_every)
    return model


def greedy_decode(model, src, max_len=20):
    model.eval()
    with torch.no_grad():
        enc_mask = padding_mask(src)
        enc_output = model.encode(src, enc_mask)
        output = torch.full((src.shape[0], 1), SOS, dtype=torch.long, device=src.device)
        attention_weights = []
        for _ in range(max_len - 1):
            dec_out, attention_weights = model.decode(output, enc_output, target_mask(output), enc_mask)
            predictions = model.generator(dec_out[:, -1:, :])
            predicted_id = torch.argmax(predictions, dim=-1)
            output = torch.cat([output, predicted_id], dim=-1)
            if torch.all(predicted_id == EOS):
                break
    return output, attention_weights
