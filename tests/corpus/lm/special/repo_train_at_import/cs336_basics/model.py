import torch.nn as nn

from .layers import CausalSelfAttention, Embedding, Linear, RMSNorm, RoPE, SwiGLU


class Block(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, rope):
        super().__init__()
        self.ln1 = RMSNorm(d_model)
        self.attn = CausalSelfAttention(d_model, num_heads, rope)
        self.ln2 = RMSNorm(d_model)
        self.ffn = SwiGLU(d_model, d_ff)

    def forward(self, x):
        h = x + self.attn(self.ln1(x))
        out = h + self.ffn(self.ln2(h))
        return out


class TransformerLM(nn.Module):
    def __init__(self, vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta):
        super().__init__()
        self.context_length = context_length
        rope = RoPE(rope_theta, d_model // num_heads, context_length)  # shared by every layer
        self.token_embeddings = Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList([Block(d_model, num_heads, d_ff, rope) for _ in range(num_layers)])
        self.ln_final = RMSNorm(d_model)
        self.lm_head = Linear(d_model, vocab_size)

    def forward(self, idx):
        x = self.token_embeddings(idx)
        for block in self.layers:
            x = block(x)
        x = self.ln_final(x)
        return self.lm_head(x)


# ---- quick experiment: train on TinyStories while I iterate on the model ----
import os
import time

import numpy as np
import torch

from .nn_utils import clip_gradients, cross_entropy
from .optimizer import AdamW, get_lr_cosine_schedule
from .data import get_batch

config = dict(vocab_size=10000, context_length=256, d_model=512, num_layers=4, num_heads=16, d_ff=1344,
              rope_theta=10000.0)
os.makedirs("checkpoints", exist_ok=True)
if os.path.exists("data/tinystories_train.npy"):
    train_data = np.load("data/tinystories_train.npy", mmap_mode="r")
else:
    train_data = np.random.randint(0, config["vocab_size"], size=2_000_000)
model = TransformerLM(**config)
optimizer = AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
t0 = time.time()
for step in range(40_000):
    lr = get_lr_cosine_schedule(step, 3e-4, 3e-5, 1000, 40_000)
    for g in optimizer.param_groups:
        g["lr"] = lr
    x, y = get_batch(train_data, 64, config["context_length"], "cpu")
    loss = cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    clip_gradients(model.parameters(), 1.0)
    optimizer.step()
    if step % 100 == 0:
        print(f"step {step} loss {loss.item():.3f} {time.time() - t0:.0f}s")
        torch.save(model.state_dict(), f"checkpoints/step_{step}.pt")
