"""Digit reversal the way the PyTorch translation tutorial builds its Seq2SeqTransformer: torch.nn's
TransformerEncoderLayer / TransformerDecoderLayer stacked in TransformerEncoder / TransformerDecoder,
sequence-first tensors (S, N, E), a TokenEmbedding scaled by sqrt(emb_size), a sinusoidal table kept as
a (maxlen, 1, emb) buffer, a square subsequent mask of 0.0 / -inf floats, boolean key-padding masks made
by create_mask, and train_epoch / greedy_decode that transpose the batch.

Adapted to the lesson's contract: MiniTransformer takes and returns batch-first tensors and transposes
them at its edges; train / greedy_decode keep the lesson's signatures.
"""
import math

import torch
import torch.nn as nn
from torch import Tensor

PAD_IDX, BOS_IDX, EOS_IDX = 10, 11, 12
PAD, SOS, EOS = PAD_IDX, BOS_IDX, EOS_IDX
VOCAB = 13


def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    lengths = torch.randint(min_len, max_len + 1, (batch_size,))
    width = int(lengths.max())
    src = torch.full((batch_size, width), PAD_IDX, dtype=torch.long)
    tgt = torch.full((batch_size, width + 2), PAD_IDX, dtype=torch.long)
    for i, n in enumerate(lengths.tolist()):
        tokens = torch.randint(0, 10, (n,))
        src[i, :n] = tokens
        tgt[i, :n + 2] = torch.cat([torch.tensor([BOS_IDX]), tokens.flip(0), torch.tensor([EOS_IDX])])
    return src.to(device), tgt.to(device)


class PositionalEncoding(nn.Module):
    def __init__(self, emb_size: int, dropout: float, maxlen: int = 5000):
        super().__init__()
        den = torch.exp(- torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
        pos = torch.arange(0, maxlen).reshape(maxlen, 1)
        pos_embedding = torch.zeros((maxlen, emb_size))
        pos_embedding[:, 0::2] = torch.sin(pos * den)
        pos_embedding[:, 1::2] = torch.cos(pos * den)
        pos_embedding = pos_embedding.unsqueeze(-2)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer('pos_embedding', pos_embedding)

    def forward(self, token_embedding: Tensor):
        return self.dropout(token_embedding + self.pos_embedding[:token_embedding.size(0), :])


class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size: int, emb_size):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_size)
        self.emb_size = emb_size

    def forward(self, tokens: Tensor):
        return self.embedding(tokens.long()) * math.sqrt(self.emb_size)


class Seq2SeqTransformer(nn.Module):
    def __init__(self, num_encoder_layers: int, num_decoder_layers: int, emb_size: int, nhead: int,
                 src_vocab_size: int, tgt_vocab_size: int, dim_feedforward: int = 512, dropout: float = 0.1,
                 maxlen: int = 5000):
        super().__init__()
        enc_layer = nn.TransformerEncoderLayer(emb_size, nhead, dim_feedforward, dropout)
        dec_layer = nn.TransformerDecoderLayer(emb_size, nhead, dim_feedforward, dropout)
        self.encoder = nn.TransformerEncoder(enc_layer, num_encoder_layers, nn.LayerNorm(emb_size),
                                             enable_nested_tensor=False)
        self.decoder = nn.TransformerDecoder(dec_layer, num_decoder_layers, nn.LayerNorm(emb_size))
        self.generator = nn.Linear(emb_size, tgt_vocab_size)
        self.src_tok_emb = TokenEmbedding(src_vocab_size, emb_size)
        self.tgt_tok_emb = TokenEmbedding(tgt_vocab_size, emb_size)
        self.positional_encoding = PositionalEncoding(emb_size, dropout=dropout, maxlen=maxlen)

    def forward(self, src: Tensor, trg: Tensor, src_mask: Tensor, tgt_mask: Tensor, src_padding_mask: Tensor,
                tgt_padding_mask: Tensor, memory_key_padding_mask: Tensor):
        src_emb = self.positional_encoding(self.src_tok_emb(src))
        tgt_emb = self.positional_encoding(self.tgt_tok_emb(trg))
        memory = self.encoder(src_emb, src_mask, src_padding_mask)
        outs = self.decoder(tgt_emb, memory, tgt_mask, None, tgt_padding_mask, memory_key_padding_mask)
        return self.generator(outs)

    def encode(self, src: Tensor, src_mask: Tensor, src_padding_mask=None):
        return self.encoder(self.positional_encoding(self.src_tok_emb(src)), src_mask, src_padding_mask)

    def decode(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor, memory_key_padding_mask=None):
        return self.decoder(self.positional_encoding(self.tgt_tok_emb(tgt)), memory, tgt_mask,
                            memory_key_padding_mask=memory_key_padding_mask)


def generate_square_subsequent_mask(sz, device='cpu'):
    mask = (torch.triu(torch.ones((sz, sz), device=device)) == 1).transpose(0, 1)
    mask = mask.float().masked_fill(mask == 0, float('-inf')).masked_fill(mask == 1, float(0.0))
    return mask


def create_mask(src, tgt):
    """src: (S, N), tgt: (T, N) -> the masks nn.Transformer* take (padding masks are (N, S), True at PAD)."""
    src_seq_len = src.shape[0]
    tgt_seq_len = tgt.shape[0]
    tgt_mask = generate_square_subsequent_mask(tgt_seq_len, src.device)
    src_mask = torch.zeros((src_seq_len, src_seq_len), device=src.device).type(torch.bool)
    src_padding_mask = (src == PAD_IDX).transpose(0, 1)
    tgt_padding_mask = (tgt == PAD_IDX).transpose(0, 1)
    return src_mask, tgt_mask, src_padding_mask, tgt_padding_mask


# ---- the lesson's contract -------------------------------------------------------------------------------

class MiniTransformer(Seq2SeqTransformer):
    """Batch-first at the edges: src (B, S), tgt (B, T) -> logits (B, T, VOCAB)."""

    def __init__(self, vocab=VOCAB, d_model=64, h=4, d_ff=256, num_layers=2, dropout=0.1, max_len=64):
        super().__init__(num_layers, num_layers, d_model, h, vocab, vocab, d_ff, dropout, max_len)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def forward(self, src, tgt):
        src, tgt = src.transpose(0, 1), tgt.transpose(0, 1)                 # (S, B), (T, B)
        src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt)
        # the tutorial's float -inf causal mask with a float padding mask of the same kind
        tgt_padding_mask = torch.zeros(tgt_padding_mask.shape, device=tgt.device).masked_fill(
            tgt_padding_mask, float('-inf'))
        src_key_padding = torch.zeros(src_padding_mask.shape, device=src.device).masked_fill(
            src_padding_mask, float('-inf'))
        logits = super().forward(src, tgt, src_mask.float(), tgt_mask, src_key_padding, tgt_padding_mask,
                                 src_key_padding)
        return logits.transpose(0, 1), None                                # (B, T, V)


def train_epoch(model, optimizer, scheduler, loss_fn, batches, log_every):
    model.train()
    losses = 0.0
    for i, (src, tgt) in enumerate(batches):
        tgt_input = tgt[:, :-1]
        logits, _ = model(src, tgt_input)
        optimizer.zero_grad()
        tgt_out = tgt[:, 1:]
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        losses += loss.item()
        if log_every and i % log_every == 0:
            print(f"batch {i}: loss {loss.item():.3f}")
    return losses / max(i + 1, 1)


def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu', warmup=400, log_every=200):
    model.to(device)
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=PAD_IDX)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup))
    batches = (make_batch(batch_size, device=device) for _ in range(steps))
    train_epoch(model, optimizer, scheduler, loss_fn, batches, log_every)
    return model


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    src = src.transpose(0, 1)                                              # (S, B)
    num_tokens = src.shape[0]
    src_mask = torch.zeros((num_tokens, num_tokens), device=src.device).type(torch.bool)
    src_padding = (src == PAD_IDX).transpose(0, 1)
    memory = model.encode(src, src_mask, src_padding)
    ys = torch.full((1, src.shape[1]), BOS_IDX, dtype=torch.long, device=src.device)   # (1, B)
    for _ in range(max_len - 1):
        tgt_mask = generate_square_subsequent_mask(ys.size(0), src.device)
        out = model.decode(ys, memory, tgt_mask, src_padding)               # (T, B, E)
        prob = model.generator(out[-1])
        next_word = prob.argmax(dim=1)
        ys = torch.cat([ys, next_word[None]], dim=0)
        if (next_word == EOS_IDX).all():
            break
    return ys.transpose(0, 1), None
