"""The `block` assignment's probes, in the order they run: its one-file pack's `probes`
(harness/packs/block/pack.py). Child side.

The lesson's code is unbatched (MultiHeadAttention(d_model, n_heads), a post-norm TransformerBlock with a causal
flag): the contract, the positional table, the causal flag measured before any probe assumes it, the attention,
the wiring, and the training probe (beside the others: `side`). `either`: reads nothing another probe leaves in
ctx.cache, so either process may run it on a repair's re-check (child/side.py); not the causal pair:
block-causal reads what block-causal-off found.
"""
from __future__ import annotations

from . import block_attention, block_causal, block_lm, block_wiring, contract, positional, structure
from .own import Own

PROBES = (
    Own("contract", contract.names, "static"),
    Own("pe", positional.table, "static"),
    Own("pe-relative", positional.pe_relative, "static"),
    Own("block-causal-off", block_causal.causal_off, "quick"),   # before any probe assumes the flag
    Own("block-rows-sum", block_attention.rows_sum, "quick", either=True),
    Own("block-saturation", block_attention.saturation, "quick", either=True),
    Own("block-permutation", block_wiring.permutation, "quick", either=True),
    Own("block-causal", block_causal.causal, "quick"),
    Own("block-residual", block_wiring.residual, "quick", either=True),
    Own("block-structure", structure.block_structure, "quick", either=True),
    Own("block-lm", block_lm.lm, "train", side=True, either=True),
)
