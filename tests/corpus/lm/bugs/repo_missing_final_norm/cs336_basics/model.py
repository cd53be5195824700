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
        return self.lm_head(x)
