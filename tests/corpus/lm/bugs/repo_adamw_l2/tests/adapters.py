from __future__ import annotations

import os
from collections.abc import Iterable
from typing import IO, Any, BinaryIO

import numpy.typing as npt
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from cs336_basics.data import get_batch
from cs336_basics.layers import CausalSelfAttention, Embedding, Linear, RMSNorm, RoPE, SwiGLU
from cs336_basics.model import Block, TransformerLM
from cs336_basics.nn_utils import clip_gradients, cross_entropy, scaled_dot_product_attention, softmax
from cs336_basics.optimizer import AdamW, get_lr_cosine_schedule
from cs336_basics.tokenizer import Tokenizer, train_bpe


def _fuse_qkv(weights: dict[str, Tensor]) -> dict[str, Tensor]:
    """Our attention keeps q, k, v in one matrix; the reference state dict has three."""
    out = {}
    for key, w in weights.items():
        if key.endswith("attn.q_proj.weight"):
            prefix = key[: -len("q_proj.weight")]
            out[prefix + "qkv_proj.weight"] = torch.cat(
                [weights[prefix + "q_proj.weight"], weights[prefix + "k_proj.weight"],
                 weights[prefix + "v_proj.weight"]], dim=0)
        elif key.endswith(("attn.k_proj.weight", "attn.v_proj.weight")):
            continue
        else:
            out[key] = w
    return out


def run_linear(d_in: int, d_out: int, weights: Float[Tensor, " d_out d_in"],
               in_features: Float[Tensor, " ... d_in"]) -> Float[Tensor, " ... d_out"]:
    lin = Linear(d_in, d_out)
    with torch.no_grad():
        lin.weight.copy_(weights)
    return lin(in_features)


def run_embedding(vocab_size: int, d_model: int, weights: Float[Tensor, " vocab_size d_model"],
                  token_ids: Int[Tensor, " ..."]) -> Float[Tensor, " ... d_model"]:
    emb = Embedding(vocab_size, d_model)
    with torch.no_grad():
        emb.weight.copy_(weights)
    return emb(token_ids)


def run_swiglu(d_model: int, d_ff: int, w1_weight: Float[Tensor, " d_ff d_model"],
               w2_weight: Float[Tensor, " d_model d_ff"], w3_weight: Float[Tensor, " d_ff d_model"],
               in_features: Float[Tensor, " ... d_model"]) -> Float[Tensor, " ... d_model"]:
    ffn = SwiGLU(d_model, d_ff)
    ffn.w1.weight.data = w1_weight
    ffn.w2.weight.data = w2_weight
    ffn.w3.weight.data = w3_weight
    return ffn(in_features)


def run_scaled_dot_product_attention(
    Q: Float[Tensor, " ... queries d_k"],
    K: Float[Tensor, " ... keys d_k"],
    V: Float[Tensor, " ... values d_v"],
    mask: Bool[Tensor, " ... queries keys"] | None = None,
) -> Float[Tensor, " ... queries d_v"]:
    return scaled_dot_product_attention(Q, K, V, mask)


def run_multihead_self_attention(d_model: int, num_heads: int, q_proj_weight: Float[Tensor, " d_k d_in"],
                                 k_proj_weight: Float[Tensor, " d_k d_in"], v_proj_weight: Float[Tensor, " d_v d_in"],
                                 o_proj_weight: Float[Tensor, " d_model d_v"],
                                 in_features: Float[Tensor, " ... sequence_length d_in"]):
    attn = CausalSelfAttention(d_model, num_heads)
    attn.load_state_dict({"qkv_proj.weight": torch.cat([q_proj_weight, k_proj_weight, v_proj_weight]),
                          "output_proj.weight": o_proj_weight})
    return attn(in_features)


def run_multihead_self_attention_with_rope(d_model: int, num_heads: int, max_seq_len: int, theta: float,
                                           q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight,
                                           in_features, token_positions=None):
    attn = CausalSelfAttention(d_model, num_heads, RoPE(theta, d_model // num_heads, max_seq_len))
    attn.load_state_dict({"qkv_proj.weight": torch.cat([q_proj_weight, k_proj_weight, v_proj_weight]),
                          "output_proj.weight": o_proj_weight})
    return attn(in_features, token_positions)


def run_rope(d_k: int, theta: float, max_seq_len: int, in_query_or_key: Float[Tensor, " ... sequence_length d_k"],
             token_positions: Int[Tensor, " ... sequence_length"]) -> Float[Tensor, " ... sequence_length d_k"]:
    return RoPE(theta, d_k, max_seq_len)(in_query_or_key, token_positions)


def run_transformer_block(d_model: int, num_heads: int, d_ff: int, max_seq_len: int, theta: float,
                          weights: dict[str, Tensor], in_features: Float[Tensor, " batch sequence_length d_model"]):
    block = Block(d_model, num_heads, d_ff, RoPE(theta, d_model // num_heads, max_seq_len))
    block.load_state_dict(_fuse_qkv(weights))
    return block(in_features)


def run_transformer_lm(vocab_size: int, context_length: int, d_model: int, num_layers: int, num_heads: int,
                       d_ff: int, rope_theta: float, weights: dict[str, Tensor],
                       in_indices: Int[Tensor, " batch_size sequence_length"]):
    model = TransformerLM(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta)
    model.load_state_dict(_fuse_qkv(weights))
    return model(in_indices)


def run_rmsnorm(d_model: int, eps: float, weights: Float[Tensor, " d_model"],
                in_features: Float[Tensor, " ... d_model"]) -> Float[Tensor, " ... d_model"]:
    rms = RMSNorm(d_model, eps)
    rms.weight.data = weights
    return rms(in_features)


def run_silu(in_features: Float[Tensor, " ..."]) -> Float[Tensor, " ..."]:
    return in_features * torch.sigmoid(in_features)


def run_get_batch(dataset: npt.NDArray, batch_size: int, context_length: int, device: str):
    return get_batch(dataset, batch_size, context_length, device)


def run_softmax(in_features: Float[Tensor, " ..."], dim: int) -> Float[Tensor, " ..."]:
    return softmax(in_features, dim)


def run_cross_entropy(inputs: Float[Tensor, " batch_size vocab_size"], targets: Int[Tensor, " batch_size"]):
    return cross_entropy(inputs, targets)


def run_gradient_clipping(parameters: Iterable[torch.nn.Parameter], max_l2_norm: float) -> None:
    clip_gradients(parameters, max_l2_norm)


def get_adamw_cls() -> type[torch.optim.Optimizer]:
    return AdamW


def run_get_lr_cosine_schedule(it: int, max_learning_rate: float, min_learning_rate: float,
                               warmup_iters: int, cosine_cycle_iters: int):
    return get_lr_cosine_schedule(it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters)


def run_save_checkpoint(model, optimizer, iteration, out):
    torch.save({"model": model.state_dict(), "opt": optimizer.state_dict(), "it": iteration}, out)


def run_load_checkpoint(src, model, optimizer) -> int:
    state = torch.load(src)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["opt"])
    return state["it"]


def get_tokenizer(vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]],
                  special_tokens: list[str] | None = None) -> Any:
    return Tokenizer(vocab, merges, special_tokens)


def run_train_bpe(input_path: str | os.PathLike, vocab_size: int, special_tokens: list[str], **kwargs):
    return train_bpe(input_path, vocab_size, special_tokens)
