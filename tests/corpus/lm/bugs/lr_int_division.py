"""Transformer LM for assignment 1, with jaxtyping shape annotations
(annotations only: nothing checks them at run time)."""
import math
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt
import torch
import torch.nn as nn
from jaxtyping import Bool, Float, Int
from torch import Tensor


class Linear(nn.Module):
    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d_out, d_in) / math.sqrt(d_in))

    def forward(self, x: Float[Tensor, "... d_in"]) -> Float[Tensor, "... d_out"]:
        return torch.einsum("...i,oi->...o", x, self.weight)


class Embedding(nn.Module):
    def __init__(self, vocab: int, d: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(vocab, d))

    def forward(self, ids: Int[Tensor, "..."]) -> Float[Tensor, "... d"]:
        return self.weight[ids]


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: Float[Tensor, "... d"]) -> Float[Tensor, "... d"]:
        x32 = x.float()
        rms = x32.pow(2).mean(-1, keepdim=True).add(self.eps).sqrt()
        return (self.weight * (x32 / rms)).type_as(x)


class SwiGLU(nn.Module):
    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.w1, self.w2, self.w3 = Linear(d_model, d_ff), Linear(d_ff, d_model), Linear(d_model, d_ff)

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))


class Rotary(nn.Module):
    def __init__(self, theta: float, d_k: int, max_seq_len: int):
        super().__init__()
        inv = 1.0 / theta ** (torch.arange(0, d_k, 2).float() / d_k)  # (d_k/2,)
        ang = torch.arange(max_seq_len).float()[:, None] * inv  # (L, d_k/2)
        # each angle used by both members of its pair: (L, d_k) as [a0, a0, a1, a1, ...]
        self.register_buffer("cos", ang.cos().repeat_interleave(2, dim=-1), persistent=False)
        self.register_buffer("sin", ang.sin().repeat_interleave(2, dim=-1), persistent=False)

    @staticmethod
    def rotate_pairs(x: Float[Tensor, "... d"]) -> Float[Tensor, "... d"]:
        pairs = x.reshape(*x.shape[:-1], -1, 2)  # (..., d/2, 2)
        rotated = torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1)  # (x0, x1) -> (-x1, x0)
        return rotated.reshape(x.shape)

    def forward(self, x: Float[Tensor, "... seq d"], pos: Int[Tensor, "... seq"]) -> Float[Tensor, "... seq d"]:
        return x * self.cos[pos] + self.rotate_pairs(x) * self.sin[pos]


def softmax(x: Float[Tensor, "..."], dim: int) -> Float[Tensor, "..."]:
    e = (x - x.max(dim=dim, keepdim=True).values).exp()
    return e / e.sum(dim=dim, keepdim=True)


def attention(Q: Float[Tensor, "... q d"], K: Float[Tensor, "... k d"], V: Float[Tensor, "... k dv"],
              mask: Bool[Tensor, "... q k"] | None = None) -> Float[Tensor, "... q dv"]:
    s = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(Q.size(-1))
    if mask is not None:
        s = s.masked_fill(mask.logical_not(), -torch.inf)
    return torch.einsum("...qk,...kd->...qd", softmax(s, -1), V)


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, rotary: Rotary | None = None):
        super().__init__()
        self.h = num_heads
        self.q_proj, self.k_proj = Linear(d_model, d_model), Linear(d_model, d_model)
        self.v_proj, self.output_proj = Linear(d_model, d_model), Linear(d_model, d_model)
        self.rotary = rotary

    def forward(self, x: Float[Tensor, "... seq d_model"],
                positions: Int[Tensor, "... seq"] | None = None) -> Float[Tensor, "... seq d_model"]:
        n = x.size(-2)
        split = lambda t: t.unflatten(-1, (self.h, -1)).transpose(-2, -3)  # (..., h, seq, dh)
        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        if self.rotary is not None:
            pos = (torch.arange(n) if positions is None else positions)[..., None, :]
            q, k = self.rotary(q, pos), self.rotary(k, pos)
        mask = torch.tril(torch.ones(n, n, dtype=torch.bool))
        o = attention(q, k, v, mask).transpose(-2, -3).flatten(-2)
        return self.output_proj(o)


class TransformerBlock(nn.Module):
    def __init__(self, d_model: int, num_heads: int, d_ff: int, max_seq_len: int, theta: float):
        super().__init__()
        self.ln1, self.ln2 = RMSNorm(d_model), RMSNorm(d_model)
        self.attn = MultiHeadSelfAttention(d_model, num_heads, Rotary(theta, d_model // num_heads, max_seq_len))
        self.ffn = SwiGLU(d_model, d_ff)

    def forward(self, x: Float[Tensor, "b seq d"]) -> Float[Tensor, "b seq d"]:
        x = x + self.attn(self.ln1(x))
        x = x + self.ffn(self.ln2(x))
        return x


class TransformerLM(nn.Module):
    def __init__(self, vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta):
        super().__init__()
        self.token_embeddings = Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList(TransformerBlock(d_model, num_heads, d_ff, context_length, rope_theta)
                                    for _ in range(num_layers))
        self.ln_final = RMSNorm(d_model)
        self.lm_head = Linear(d_model, vocab_size)

    def forward(self, ids: Int[Tensor, "b seq"]) -> Float[Tensor, "b seq vocab"]:
        x = self.token_embeddings(ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.ln_final(x))


def _loaded(module: nn.Module, state: dict[str, Tensor]) -> nn.Module:
    module.load_state_dict(state, strict=True)
    return module


def run_linear(d_in: int, d_out: int, weights: Float[Tensor, " d_out d_in"],
               in_features: Float[Tensor, " ... d_in"]) -> Float[Tensor, " ... d_out"]:
    return _loaded(Linear(d_in, d_out), {"weight": weights})(in_features)


def run_embedding(vocab_size: int, d_model: int, weights: Float[Tensor, " vocab_size d_model"],
                  token_ids: Int[Tensor, " ..."]) -> Float[Tensor, " ... d_model"]:
    return _loaded(Embedding(vocab_size, d_model), {"weight": weights})(token_ids)


def run_swiglu(d_model: int, d_ff: int, w1_weight: Float[Tensor, " d_ff d_model"],
               w2_weight: Float[Tensor, " d_model d_ff"], w3_weight: Float[Tensor, " d_ff d_model"],
               in_features: Float[Tensor, " ... d_model"]) -> Float[Tensor, " ... d_model"]:
    ffn = _loaded(SwiGLU(d_model, d_ff), {"w1.weight": w1_weight, "w2.weight": w2_weight, "w3.weight": w3_weight})
    return ffn(in_features)


def run_scaled_dot_product_attention(Q: Float[Tensor, " ... queries d_k"], K: Float[Tensor, " ... keys d_k"],
                                     V: Float[Tensor, " ... values d_v"],
                                     mask: Bool[Tensor, " ... queries keys"] | None = None
                                     ) -> Float[Tensor, " ... queries d_v"]:
    return attention(Q, K, V, mask)


def _mha_state(q, k, v, o):
    return {"q_proj.weight": q, "k_proj.weight": k, "v_proj.weight": v, "output_proj.weight": o}


def run_multihead_self_attention(d_model: int, num_heads: int, q_proj_weight: Float[Tensor, " d_k d_in"],
                                 k_proj_weight: Float[Tensor, " d_k d_in"], v_proj_weight: Float[Tensor, " d_v d_in"],
                                 o_proj_weight: Float[Tensor, " d_model d_v"],
                                 in_features: Float[Tensor, " ... sequence_length d_in"]
                                 ) -> Float[Tensor, " ... sequence_length d_out"]:
    mha = _loaded(MultiHeadSelfAttention(d_model, num_heads),
                  _mha_state(q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight))
    return mha(in_features)


def run_multihead_self_attention_with_rope(
    d_model: int, num_heads: int, max_seq_len: int, theta: float,
    q_proj_weight: Float[Tensor, " d_k d_in"], k_proj_weight: Float[Tensor, " d_k d_in"],
    v_proj_weight: Float[Tensor, " d_v d_in"], o_proj_weight: Float[Tensor, " d_model d_v"],
    in_features: Float[Tensor, " ... sequence_length d_in"],
    token_positions: Int[Tensor, " ... sequence_length"] | None = None,
) -> Float[Tensor, " ... sequence_length d_out"]:
    mha = _loaded(MultiHeadSelfAttention(d_model, num_heads, Rotary(theta, d_model // num_heads, max_seq_len)),
                  _mha_state(q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight))
    return mha(in_features, token_positions)


def run_rope(d_k: int, theta: float, max_seq_len: int, in_query_or_key: Float[Tensor, " ... sequence_length d_k"],
             token_positions: Int[Tensor, " ... sequence_length"]) -> Float[Tensor, " ... sequence_length d_k"]:
    return Rotary(theta, d_k, max_seq_len)(in_query_or_key, token_positions)


def run_transformer_block(d_model: int, num_heads: int, d_ff: int, max_seq_len: int, theta: float,
                          weights: dict[str, Tensor], in_features: Float[Tensor, " batch sequence_length d_model"]
                          ) -> Float[Tensor, " batch sequence_length d_model"]:
    return _loaded(TransformerBlock(d_model, num_heads, d_ff, max_seq_len, theta), weights)(in_features)


def run_transformer_lm(vocab_size: int, context_length: int, d_model: int, num_layers: int, num_heads: int,
                       d_ff: int, rope_theta: float, weights: dict[str, Tensor],
                       in_indices: Int[Tensor, " batch_size sequence_length"]
                       ) -> Float[Tensor, " batch_size sequence_length vocab_size"]:
    lm = TransformerLM(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta)
    return _loaded(lm, weights)(in_indices)


def run_rmsnorm(d_model: int, eps: float, weights: Float[Tensor, " d_model"],
                in_features: Float[Tensor, " ... d_model"]) -> Float[Tensor, " ... d_model"]:
    return _loaded(RMSNorm(d_model, eps), {"weight": weights})(in_features)


def run_silu(in_features: Float[Tensor, " ..."]) -> Float[Tensor, " ..."]:
    return in_features * torch.sigmoid(in_features)


def run_softmax(in_features: Float[Tensor, " ..."], dim: int) -> Float[Tensor, " ..."]:
    return softmax(in_features, dim)


def run_cross_entropy(inputs: Float[Tensor, " batch_size vocab_size"], targets: Int[Tensor, " batch_size"]
                      ) -> Float[Tensor, ""]:
    log_probs = inputs - torch.logsumexp(inputs, dim=-1, keepdim=True)
    return -log_probs[torch.arange(inputs.shape[0]), targets].mean()


def run_gradient_clipping(parameters: Iterable[torch.nn.Parameter], max_l2_norm: float) -> None:
    grads = [p.grad for p in parameters if p.grad is not None]
    total = torch.norm(torch.cat([g.flatten() for g in grads]), 2)
    if total > max_l2_norm:
        for g in grads:
            g.mul_(max_l2_norm / (total + 1e-6))


class AdamW(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.01):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    def step(self, closure=None):
        loss = None if closure is None else closure()
        for group in self.param_groups:
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                m = state.setdefault("m", torch.zeros_like(p.data))
                v = state.setdefault("v", torch.zeros_like(p.data))
                t = state["t"] = state.get("t", 0) + 1
                g = p.grad.data
                m.mul_(b1).add_((1 - b1) * g)
                v.mul_(b2).add_((1 - b2) * g * g)
                a_t = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
                p.data.add_(-a_t * m / (v.sqrt() + eps))
                p.data.add_(-lr * wd * p.data)
        return loss


def get_adamw_cls() -> type[torch.optim.Optimizer]:
    return AdamW


def run_get_lr_cosine_schedule(it: int, max_learning_rate: float, min_learning_rate: float,
                               warmup_iters: int, cosine_cycle_iters: int) -> float:
    if it < warmup_iters:
        return it // warmup_iters * max_learning_rate
    if it <= cosine_cycle_iters:
        cos = math.cos((it - warmup_iters) / (cosine_cycle_iters - warmup_iters) * math.pi)
        return min_learning_rate + 0.5 * (1 + cos) * (max_learning_rate - min_learning_rate)
    return min_learning_rate


def run_get_batch(dataset: npt.NDArray, batch_size: int, context_length: int, device: str
                  ) -> tuple[Tensor, Tensor]:
    starts = np.random.randint(0, len(dataset) - context_length, batch_size)
    offsets = np.arange(context_length)
    x = dataset[starts[:, None] + offsets]
    y = dataset[starts[:, None] + offsets + 1]
    return torch.tensor(x, dtype=torch.long, device=device), torch.tensor(y, dtype=torch.long, device=device)
