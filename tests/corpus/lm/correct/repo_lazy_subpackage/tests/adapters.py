from __future__ import annotations

import os
from collections.abc import Iterable
from typing import IO, Any, BinaryIO

import numpy.typing as npt
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor


def run_linear(d_in: int, d_out: int, weights: Float[Tensor, " d_out d_in"],
               in_features: Float[Tensor, " ... d_in"]) -> Float[Tensor, " ... d_out"]:
    from cs336_basics.nn.layers import Linear

    layer = Linear(d_in, d_out)
    layer.load_state_dict({"weight": weights})
    return layer(in_features)


def run_embedding(vocab_size: int, d_model: int, weights: Float[Tensor, " vocab_size d_model"],
                  token_ids: Int[Tensor, " ..."]) -> Float[Tensor, " ... d_model"]:
    from cs336_basics import Embedding

    layer = Embedding(vocab_size, d_model)
    layer.load_state_dict({"weight": weights})
    return layer(token_ids)


def run_swiglu(d_model: int, d_ff: int, w1_weight: Float[Tensor, " d_ff d_model"],
               w2_weight: Float[Tensor, " d_model d_ff"], w3_weight: Float[Tensor, " d_ff d_model"],
               in_features: Float[Tensor, " ... d_model"]) -> Float[Tensor, " ... d_model"]:
    from cs336_basics.nn.layers import SwiGLU

    ffn = SwiGLU(d_model, d_ff)
    ffn.load_state_dict({"w1.weight": w1_weight, "w2.weight": w2_weight, "w3.weight": w3_weight})
    return ffn(in_features)


def run_scaled_dot_product_attention(Q: Float[Tensor, " ... queries d_k"], K: Float[Tensor, " ... keys d_k"],
                                     V: Float[Tensor, " ... values d_v"],
                                     mask: Bool[Tensor, " ... queries keys"] | None = None
                                     ) -> Float[Tensor, " ... queries d_v"]:
    from cs336_basics.nn.attention import scaled_dot_product_attention

    return scaled_dot_product_attention(Q, K, V, mask)


def run_multihead_self_attention(d_model: int, num_heads: int, q_proj_weight: Float[Tensor, " d_k d_in"],
                                 k_proj_weight: Float[Tensor, " d_k d_in"], v_proj_weight: Float[Tensor, " d_v d_in"],
                                 o_proj_weight: Float[Tensor, " d_model d_v"],
                                 in_features: Float[Tensor, " ... sequence_length d_in"]
                                 ) -> Float[Tensor, " ... sequence_length d_out"]:
    from cs336_basics.nn.attention import MultiHeadSelfAttention

    mha = MultiHeadSelfAttention(d_model, num_heads)
    mha.load_state_dict({"q_proj.weight": q_proj_weight, "k_proj.weight": k_proj_weight,
                         "v_proj.weight": v_proj_weight, "output_proj.weight": o_proj_weight})
    return mha(in_features)


def run_multihead_self_attention_with_rope(
    d_model: int, num_heads: int, max_seq_len: int, theta: float,
    q_proj_weight: Float[Tensor, " d_k d_in"], k_proj_weight: Float[Tensor, " d_k d_in"],
    v_proj_weight: Float[Tensor, " d_v d_in"], o_proj_weight: Float[Tensor, " d_model d_v"],
    in_features: Float[Tensor, " ... sequence_length d_in"],
    token_positions: Int[Tensor, " ... sequence_length"] | None = None,
) -> Float[Tensor, " ... sequence_length d_out"]:
    from cs336_basics.nn.attention import MultiHeadSelfAttention
    from cs336_basics.nn.rope import RoPE

    mha = MultiHeadSelfAttention(d_model, num_heads, RoPE(theta, d_model // num_heads, max_seq_len))
    mha.load_state_dict({"q_proj.weight": q_proj_weight, "k_proj.weight": k_proj_weight,
                         "v_proj.weight": v_proj_weight, "output_proj.weight": o_proj_weight})
    return mha(in_features, token_positions)


def run_rope(d_k: int, theta: float, max_seq_len: int, in_query_or_key: Float[Tensor, " ... sequence_length d_k"],
             token_positions: Int[Tensor, " ... sequence_length"]) -> Float[Tensor, " ... sequence_length d_k"]:
    from cs336_basics.nn.rope import RoPE

    return RoPE(theta, d_k, max_seq_len)(in_query_or_key, token_positions)


def run_transformer_block(d_model: int, num_heads: int, d_ff: int, max_seq_len: int, theta: float,
                          weights: dict[str, Tensor], in_features: Float[Tensor, " batch sequence_length d_model"]
                          ) -> Float[Tensor, " batch sequence_length d_model"]:
    from cs336_basics.nn.transformer import TransformerBlock

    block = TransformerBlock(d_model, num_heads, d_ff, max_seq_len, theta)
    block.load_state_dict(weights)
    return block(in_features)


def run_transformer_lm(vocab_size: int, context_length: int, d_model: int, num_layers: int, num_heads: int,
                       d_ff: int, rope_theta: float, weights: dict[str, Tensor],
                       in_indices: Int[Tensor, " batch_size sequence_length"]
                       ) -> Float[Tensor, " batch_size sequence_length vocab_size"]:
    from cs336_basics.nn.transformer import TransformerLM

    lm = TransformerLM(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta)
    lm.load_state_dict(weights)
    return lm(in_indices)


def run_rmsnorm(d_model: int, eps: float, weights: Float[Tensor, " d_model"],
                in_features: Float[Tensor, " ... d_model"]) -> Float[Tensor, " ... d_model"]:
    from cs336_basics.nn.layers import RMSNorm

    norm = RMSNorm(d_model, eps)
    norm.load_state_dict({"weight": weights})
    return norm(in_features)


def run_silu(in_features: Float[Tensor, " ..."]) -> Float[Tensor, " ..."]:
    return torch.sigmoid(in_features) * in_features


def run_get_batch(dataset: npt.NDArray, batch_size: int, context_length: int, device: str
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    from cs336_basics.training import sample_batch

    return sample_batch(dataset, batch_size, context_length, device)


def run_softmax(in_features: Float[Tensor, " ..."], dim: int) -> Float[Tensor, " ..."]:
    from cs336_basics.nn.attention import softmax

    return softmax(in_features, dim)


def run_cross_entropy(inputs: Float[Tensor, " batch_size vocab_size"], targets: Int[Tensor, " batch_size"]
                      ) -> Float[Tensor, ""]:
    from cs336_basics.training import cross_entropy

    return cross_entropy(inputs, targets)


def run_gradient_clipping(parameters: Iterable[torch.nn.Parameter], max_l2_norm: float) -> None:
    from cs336_basics.training import clip_grad_norm

    clip_grad_norm(parameters, max_l2_norm)


def get_adamw_cls() -> type[torch.optim.Optimizer]:
    from cs336_basics.training import AdamW

    return AdamW


def run_get_lr_cosine_schedule(it: int, max_learning_rate: float, min_learning_rate: float,
                               warmup_iters: int, cosine_cycle_iters: int):
    from cs336_basics.training import cosine_lr

    return cosine_lr(it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters)


def run_save_checkpoint(model: torch.nn.Module, optimizer: torch.optim.Optimizer, iteration: int,
                        out: str | os.PathLike | BinaryIO | IO[bytes]):
    raise NotImplementedError


def run_load_checkpoint(src: str | os.PathLike | BinaryIO | IO[bytes], model: torch.nn.Module,
                        optimizer: torch.optim.Optimizer):
    raise NotImplementedError


def get_tokenizer(vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]],
                  special_tokens: list[str] | None = None) -> Any:
    from cs336_basics.bpe import Tokenizer

    return Tokenizer(vocab, merges, special_tokens)


def run_train_bpe(input_path: str | os.PathLike, vocab_size: int, special_tokens: list[str], **kwargs):
    from cs336_basics.bpe import train_bpe

    return train_bpe(input_path, vocab_size, special_tokens, **kwargs)
