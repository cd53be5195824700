"""The team's reference for CS231n assignment 3's transformer part, written from the maths.

Only the course's public contract is kept (class names, constructor and forward signatures, the attribute
names key/query/value/proj the course's weight-copying checks rely on, attn_mask's 0 = do not attend); every
body is our own. The probes build it beside the student's class from the same seed and compare.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn


class PositionalEncoding(nn.Module):
    """x + P[:S] then dropout, P[i, 2k] = sin(i / 10000^(2k/D)), P[i, 2k+1] = cos(i / 10000^(2k/D))."""

    def __init__(self, embed_dim, dropout=0.1, max_len=5000):
        super().__init__()
        assert embed_dim % 2 == 0
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len, dtype=torch.float32)[:, None]
        rate = torch.pow(10000.0, -torch.arange(0, embed_dim, 2, dtype=torch.float32) / embed_dim)
        table = torch.zeros(1, max_len, embed_dim)
        table[0, :, 0::2] = torch.sin(position * rate)
        table[0, :, 1::2] = torch.cos(position * rate)
        self.register_buffer("pe", table)

    def forward(self, x):
        n, s, d = x.shape
        out = x + self.pe[:, :s, :d]
        return self.dropout(out)


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention over num_heads heads; attn_mask (S, T): 0 (or False) blocks."""

    def __init__(self, embed_dim, num_heads, dropout=0.1):
        super().__init__()
        assert embed_dim % num_heads == 0
        self.key = nn.Linear(embed_dim, embed_dim)
        self.query = nn.Linear(embed_dim, embed_dim)
        self.value = nn.Linear(embed_dim, embed_dim)
        self.proj = nn.Linear(embed_dim, embed_dim)
        self.attn_drop = nn.Dropout(dropout)
        self.n_head = num_heads
        self.emd_dim = embed_dim
        self.head_dim = embed_dim // num_heads

    def forward(self, query, key, value, attn_mask=None):
        n, s, e = query.shape
        t = value.shape[1]
        h, hd = self.n_head, self.head_dim
        q = self.query(query).view(n, s, h, hd).transpose(1, 2)
        k = self.key(key).view(n, t, h, hd).transpose(1, 2)
        v = self.value(value).view(n, t, h, hd).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        if attn_mask is not None:
            scores = scores.masked_fill(attn_mask == 0, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        weights = self.attn_drop(weights)
        heads = weights @ v
        merged = heads.transpose(1, 2).reshape(n, s, e)
        return self.proj(merged)


class FeedForwardNetwork(nn.Module):
    def __init__(self, embed_dim, ffn_dim, dropout=0.1):
        super().__init__()
        self.fc1 = nn.Linear(embed_dim, ffn_dim)
        self.gelu = nn.GELU()
        self.dropout = nn.Dropout(dropout)
        self.fc2 = nn.Linear(ffn_dim, embed_dim)

    def forward(self, x):
        return self.fc2(self.dropout(self.gelu(self.fc1(x))))


class TransformerDecoderLayer(nn.Module):
    """Post-norm: self-attention under tgt_mask, attention to the memory, feed-forward; each with a residual."""

    def __init__(self, input_dim, num_heads, dim_feedforward=2048, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(input_dim, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(input_dim, num_heads, dropout)
        self.ffn = FeedForwardNetwork(input_dim, dim_feedforward, dropout)
        self.norm_self = nn.LayerNorm(input_dim)
        self.norm_cross = nn.LayerNorm(input_dim)
        self.norm_ffn = nn.LayerNorm(input_dim)
        self.dropout_self = nn.Dropout(dropout)
        self.dropout_cross = nn.Dropout(dropout)
        self.dropout_ffn = nn.Dropout(dropout)

    def forward(self, tgt, memory, tgt_mask=None):
        a = self.self_attn(query=tgt, key=tgt, value=tgt, attn_mask=tgt_mask)
        tgt = self.norm_self(tgt + self.dropout_self(a))
        c = self.cross_attn(query=tgt, key=memory, value=memory)
        tgt = self.norm_cross(tgt + self.dropout_cross(c))
        f = self.ffn(tgt)
        return self.norm_ffn(tgt + self.dropout_ffn(f))


class PatchEmbedding(nn.Module):
    """(N, C, H, W) -> (N, (H/p)(W/p), embed_dim): each p x p patch flattened (channel, row, column) and projected."""

    def __init__(self, img_size, patch_size, in_channels=3, embed_dim=128):
        super().__init__()
        assert img_size % patch_size == 0
        self.img_size, self.patch_size, self.in_channels, self.embed_dim = img_size, patch_size, in_channels, embed_dim
        self.num_patches = (img_size // patch_size) ** 2
        self.patch_dim = patch_size * patch_size * in_channels
        self.proj = nn.Linear(self.patch_dim, embed_dim)

    def forward(self, x):
        n, c, hh, ww = x.shape
        p = self.patch_size
        grid = x.reshape(n, c, hh // p, p, ww // p, p).permute(0, 2, 4, 1, 3, 5)
        return self.proj(grid.reshape(n, -1, self.patch_dim))


class TransformerEncoderLayer(nn.Module):
    def __init__(self, input_dim, num_heads, dim_feedforward=2048, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(input_dim, num_heads, dropout)
        self.ffn = FeedForwardNetwork(input_dim, dim_feedforward, dropout)
        self.norm_self = nn.LayerNorm(input_dim)
        self.norm_ffn = nn.LayerNorm(input_dim)
        self.dropout_self = nn.Dropout(dropout)
        self.dropout_ffn = nn.Dropout(dropout)

    def forward(self, src, src_mask=None):
        a = self.self_attn(query=src, key=src, value=src, attn_mask=src_mask)
        src = self.norm_self(src + self.dropout_self(a))
        return self.norm_ffn(src + self.dropout_ffn(self.ffn(src)))


class TransformerDecoder(nn.Module):
    def __init__(self, decoder_layer, num_layers):
        super().__init__()
        self.layers = nn.ModuleList([decoder_layer] + [_fresh(decoder_layer) for _ in range(num_layers - 1)])

    def forward(self, tgt, memory, tgt_mask=None):
        for layer in self.layers:
            tgt = layer(tgt, memory, tgt_mask=tgt_mask)
        return tgt


class TransformerEncoder(nn.Module):
    def __init__(self, encoder_layer, num_layers):
        super().__init__()
        self.layers = nn.ModuleList([encoder_layer] + [_fresh(encoder_layer) for _ in range(num_layers - 1)])

    def forward(self, src, src_mask=None):
        for layer in self.layers:
            src = layer(src, src_mask=src_mask)
        return src


def _fresh(layer):
    import copy
    return copy.deepcopy(layer)


def _init_small(module):
    if isinstance(module, (nn.Linear, nn.Embedding)):
        module.weight.data.normal_(mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            module.bias.data.zero_()
    elif isinstance(module, nn.LayerNorm):
        module.bias.data.zero_()
        module.weight.data.fill_(1.0)


class CaptioningTransformer(nn.Module):
    """Image features (N, D) -> a memory of one token; captions (N, T) -> scores (N, T, V) under a causal mask."""

    def __init__(self, word_to_idx, input_dim, wordvec_dim, num_heads=4, num_layers=2, max_length=50):
        super().__init__()
        vocab_size = len(word_to_idx)
        self.vocab_size = vocab_size
        self._null = word_to_idx["<NULL>"]
        self._start = word_to_idx.get("<START>", None)
        self._end = word_to_idx.get("<END>", None)
        self.visual_projection = nn.Linear(input_dim, wordvec_dim)
        self.embedding = nn.Embedding(vocab_size, wordvec_dim, padding_idx=self._null)
        self.positional_encoding = PositionalEncoding(wordvec_dim, max_len=max_length)
        layer = TransformerDecoderLayer(input_dim=wordvec_dim, num_heads=num_heads)
        self.transformer = TransformerDecoder(layer, num_layers=num_layers)
        self.output = nn.Linear(wordvec_dim, vocab_size)
        self.apply(_init_small)

    def forward(self, features, captions):
        n, t = captions.shape
        words = self.positional_encoding(self.embedding(captions))
        memory = self.visual_projection(features).unsqueeze(1)
        tgt_mask = torch.tril(torch.ones(t, t, device=captions.device, dtype=torch.bool))
        hidden = self.transformer(words, memory, tgt_mask=tgt_mask)
        return self.output(hidden)

    def sample(self, features, max_length=30):
        with torch.no_grad():
            features = torch.as_tensor(features, dtype=torch.float32)
            n = features.shape[0]
            captions = self._null * torch.ones((n, max_length), dtype=torch.long)
            partial = self._start * torch.ones((n, 1), dtype=torch.long)
            for step in range(max_length):
                scores = self.forward(features, partial)[:, -1, :]
                word = torch.argmax(scores, dim=1)
                captions[:, step] = word
                partial = torch.cat([partial, word[:, None]], dim=1)
            return captions.numpy()


class VisionTransformer(nn.Module):
    def __init__(self, img_size=32, patch_size=8, in_channels=3, embed_dim=128, num_layers=6, num_heads=4,
                 dim_feedforward=256, num_classes=10, dropout=0.1):
        super().__init__()
        self.patch_embed = PatchEmbedding(img_size, patch_size, in_channels, embed_dim)
        self.positional_encoding = PositionalEncoding(embed_dim, dropout=dropout,
                                                      max_len=self.patch_embed.num_patches)
        layer = TransformerEncoderLayer(embed_dim, num_heads, dim_feedforward, dropout)
        self.transformer = TransformerEncoder(layer, num_layers)
        self.head = nn.Linear(embed_dim, num_classes)
        self.apply(_init_small)

    def forward(self, x):
        tokens = self.positional_encoding(self.patch_embed(x))
        pooled = self.transformer(tokens).mean(dim=1)
        return self.head(pooled)

