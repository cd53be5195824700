# Implementing a Mini Transformer from Scratch
# The lesson's code, pasted top to bottom, demos included. It learns to reverse
# a sequence of digits. Cells are marked with "# %%" (VS Code / jupytext style);
# submissions/make_notebook.py turns this file into reversal_lesson.ipynb.

# %% [markdown]
# ## Step 0: the data
# Thirteen tokens: the digits 0-9 plus PAD, SOS and EOS.

# %%
import torch
import torch.nn as nn
import torch.nn.functional as F
import math

PAD, SOS, EOS = 10, 11, 12
VOCAB = 13

def make_batch(batch_size, min_len=4, max_len=10, device='cpu'):
    """Returns (src, tgt). tgt is SOS + reversed(src) + EOS, all padded."""
    lens = torch.randint(min_len, max_len + 1, (batch_size,))
    T_src = int(lens.max())
    T_tgt = T_src + 2                      # room for SOS and EOS
    src = torch.full((batch_size, T_src), PAD, dtype=torch.long)
    tgt = torch.full((batch_size, T_tgt), PAD, dtype=torch.long)
    for i, L in enumerate(lens):
        seq = torch.randint(0, 10, (L,))
        src[i, :L] = seq
        tgt[i, 0] = SOS
        tgt[i, 1:L + 1] = seq.flip(0)      # the reversal
        tgt[i, L + 1] = EOS
    return src.to(device), tgt.to(device)

src, tgt = make_batch(2, min_len=4, max_len=5)
print(src[0])   # tensor([ 3,  1,  4,  1,  5])
print(tgt[0])   # tensor([11,  5,  1,  4,  1,  3, 12])

# %% [markdown]
# ## Step 1: positional encoding

# %%
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        pe = torch.zeros(max_len, d_model)
        pos = torch.arange(max_len).unsqueeze(1).float()
        div = torch.exp(torch.arange(0, d_model, 2).float()
                        * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer('pe', pe.unsqueeze(0))     # (1, max_len, d_model)

    def forward(self, x):
        return self.dropout(x + self.pe[:, :x.size(1)])

# %% [markdown]
# ## Step 2: multi-head attention

# %%
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        assert d_model % num_heads == 0
        self.d_model, self.h = d_model, num_heads
        self.d_k = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def _split(self, x):
        B, T, _ = x.shape
        return x.view(B, T, self.h, self.d_k).transpose(1, 2)    # (B, h, T, d_k)

    def forward(self, q, k, v, mask=None):
        B, T_q, _ = q.shape
        Q, K, V = self._split(self.W_q(q)), self._split(self.W_k(k)), self._split(self.W_v(v))
        scores = Q @ K.transpose(-2, -1) / math.sqrt(self.d_k)   # (B, h, T_q, T_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, -1e9)
        attn = self.dropout(torch.softmax(scores, dim=-1))
        out = (attn @ V).transpose(1, 2).contiguous().view(B, T_q, self.d_model)
        return self.W_o(out), attn

# %% [markdown]
# ## Step 3: feed-forward, encoder, decoder

# %%
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_model, d_ff), nn.ReLU(),
            nn.Dropout(dropout), nn.Linear(d_ff, d_model))

    def forward(self, x):
        return self.net(x)

class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.n1, self.n2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        a, _ = self.attn(x, x, x, mask)          # self-attention: q = k = v = x
        x = self.n1(x + self.drop(a))            # residual, then normalise
        x = self.n2(x + self.drop(self.ff(x)))
        return x

class DecoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn  = MultiHeadAttention(d_model, h, dropout)
        self.cross_attn = MultiHeadAttention(d_model, h, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.n1 = nn.LayerNorm(d_model)
        self.n2 = nn.LayerNorm(d_model)
        self.n3 = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, src_mask=None):
        a, _ = self.self_attn(x, x, x, tgt_mask)
        x = self.n1(x + self.drop(a))
        # Q from the decoder, K and V from the encoder output
        c, cross = self.cross_attn(x, memory, memory, src_mask)
        x = self.n2(x + self.drop(c))
        x = self.n3(x + self.drop(self.ff(x)))
        return x, cross

# %% [markdown]
# ## Step 4: masks and the full model

# %%
def padding_mask(x, pad=PAD):
    """(B, T) -> (B, 1, 1, T); True where the token is real."""
    return (x != pad).unsqueeze(1).unsqueeze(2)

def target_mask(x, pad=PAD):
    """(B, T) -> (B, 1, T, T); padding AND causal."""
    B, T = x.shape
    pad_m = (x != pad).unsqueeze(1).unsqueeze(2)                       # (B,1,1,T)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool,
                                   device=x.device))[None, None]       # (1,1,T,T)
    return pad_m & causal

class MiniTransformer(nn.Module):
    def __init__(self, vocab=VOCAB, d_model=64, h=4, d_ff=256,
                 num_layers=2, dropout=0.1, max_len=64):
        super().__init__()
        self.d_model = d_model
        self.src_emb = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.tgt_emb = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.pos = PositionalEncoding(d_model, max_len, dropout)
        self.enc = nn.ModuleList(EncoderLayer(d_model, h, d_ff, dropout)
                                 for _ in range(num_layers))
        self.dec = nn.ModuleList(DecoderLayer(d_model, h, d_ff, dropout)
                                 for _ in range(num_layers))
        self.generator = nn.Linear(d_model, vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src, src_mask):
        x = self.pos(self.src_emb(src) * math.sqrt(self.d_model))
        for layer in self.enc:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt, memory, tgt_mask, src_mask):
        x = self.pos(self.tgt_emb(tgt) * math.sqrt(self.d_model))
        maps = []
        for layer in self.dec:
            x, cross = layer(x, memory, tgt_mask, src_mask)
            maps.append(cross)
        return x, maps

    def forward(self, src, tgt):
        src_mask = padding_mask(src)
        tgt_mask = target_mask(tgt)
        memory = self.encode(src, src_mask)
        out, maps = self.decode(tgt, memory, tgt_mask, src_mask)
        return self.generator(out), maps

# %% [markdown]
# ## Step 5: the training loop

# %%
def train(model, steps=3000, batch_size=64, lr=1e-3, device='cpu',
          warmup=400, log_every=200):
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warmup, 1.0))     # linear warmup, then flat
    for step in range(1, steps + 1):
        src, tgt = make_batch(batch_size, device=device)
        tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]      # SHIFT RIGHT
        logits, _ = model(src, tgt_in)
        loss = F.cross_entropy(
            logits.reshape(-1, VOCAB), tgt_out.reshape(-1),
            ignore_index=PAD)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % log_every == 0 or step == 1:
            print(f"step {step:5d}  loss {loss.item():.4f}  "
                  f"grad_norm {gnorm:.2f}  lr {sched.get_last_lr()[0]:.2e}")
    return model

# %%
model = MiniTransformer()
print(sum(p.numel() for p in model.parameters()))   # 235981

# %%
train(model)

# %% [markdown]
# ## Step 6: greedy decoding

# %%
@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    src_mask = padding_mask(src)
    memory = model.encode(src, src_mask)               # encoder runs ONCE
    ys = torch.full((src.size(0), 1), SOS, dtype=torch.long, device=src.device)
    for _ in range(max_len - 1):
        out, maps = model.decode(ys, memory, target_mask(ys), src_mask)
        next_tok = model.generator(out[:, -1]).argmax(-1, keepdim=True)
        ys = torch.cat([ys, next_tok], dim=1)
        if (next_tok == EOS).all():
            break
    return ys, maps

src, tgt = make_batch(1, min_len=6, max_len=6)
pred, maps = greedy_decode(model, src)
print("source    ", src[0].tolist())          # [7, 2, 9, 0, 4, 6]
print("prediction", pred[0].tolist())         # [11, 6, 4, 0, 9, 2, 7, 12]

# %% [markdown]
# ## Step 7: looking at cross-attention

# %%
# %matplotlib inline
import matplotlib.pyplot as plt

def show_cross_attention(maps, src, pred, layer=-1, head=0):
    # maps[layer]: (B, h, T_tgt, T_src)
    w = maps[layer][0, head].detach().cpu().numpy()
    fig, ax = plt.subplots(figsize=(6, 5))
    im = ax.imshow(w, cmap='viridis', aspect='auto', vmin=0, vmax=1)
    ax.set_xticks(range(src.size(1)), [str(t) for t in src[0].tolist()])
    # row i is the query at input position i, which produced token i+1
    ax.set_yticks(range(w.shape[0]), [str(t) for t in pred[0, 1:w.shape[0] + 1].tolist()])
    ax.set_xlabel('source position')
    ax.set_ylabel('generated token')
    fig.colorbar(im)
    plt.tight_layout()
    return fig

# %%
fig = show_cross_attention(maps, src, pred)
plt.show()

# %% [markdown]
# ## Debugging: two tests that catch most bugs

# %%
@torch.no_grad()
def test_no_future_leak(model):
    model.eval()
    src, tgt = make_batch(1, min_len=8, max_len=8)
    tgt_in = tgt[:, :-1]
    a, _ = model(src, tgt_in)
    t2 = tgt_in.clone()
    t2[0, -1] = (t2[0, -1] + 1) % 10           # change only the LAST input token
    b, _ = model(src, t2)
    assert torch.allclose(a[0, :-1], b[0, :-1], atol=1e-6), "future leakage"
    print("causal masking OK")

def test_overfit_one_batch(model, steps=400):
    """A correct model must drive ONE fixed batch to near-zero loss.
    Pass a fresh MiniTransformer(dropout=0.0): with dropout on, it cannot memorise."""
    model.train()
    src, tgt = make_batch(8)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(steps):
        logits, _ = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB),
                               tgt[:, 1:].reshape(-1), ignore_index=PAD)
        opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
    print(f"overfit loss {loss.item():.4f}")   # should be well under 0.01
    assert loss.item() < 0.05

# %%
test_no_future_leak(model)
test_overfit_one_batch(MiniTransformer(dropout=0.0))
