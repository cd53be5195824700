"""The `reversal` assignment's probes (the lesson's encoder-decoder reversing digit sequences), in the order they
run: its one-file pack's `probes` (harness/packs/reversal/pack.py). Child side.

The contract and the static probes first (names, shapes, parameters, the data, the positional table), then the
model's properties, the attention, the masks, the wiring, decoding, and the training probes (`side`: beside the
others). Every probe after the static ones builds its own model and inputs (`either`: either process may run it on
a repair's re-check, child/side.py).
"""
from __future__ import annotations

from . import attention, contract, data, decode_batch, decoding, embedding, model_wiring, overfit, padding
from . import positional, properties, residual_train, structure, train_masks, training
from .own import Own


def _own(id: str, fn, cost: str, side: bool = False) -> Own:
    return Own(id, fn, cost, side, either=cost != "static")


PROBES = (
    _own("contract", contract.names, "static"),
    _own("shapes", contract.shapes, "static"),
    _own("param-count", contract.param_count, "static"),
    _own("data", data.make_batch, "static"),
    _own("pe", positional.table, "static"),
    _own("eval-determinism", properties.determinism, "quick"),
    _own("batch-independence", properties.batch_independence, "quick"),
    _own("first-loss", contract.first_loss, "quick"),
    _own("attn-rows-sum", attention.softmax_axis, "quick"),
    _own("attn-saturation", attention.saturation, "quick"),
    _own("heads-permutation", attention.head_permutation, "quick"),
    _own("causal-leak", attention.leakage, "quick"),
    _own("causal-leak-train", train_masks.leak_in_training, "quick"),
    _own("padding-invariance", padding.invariance, "quick"),
    _own("padded-row-finite", padding.padded_row, "quick"),
    _own("gradient-flow", model_wiring.gradient_flow, "quick"),
    _own("residual", model_wiring.residual, "quick"),
    _own("residual-train", residual_train.residual_train, "quick"),
    _own("cross-wiring", model_wiring.cross_wiring, "quick"),
    _own("stateless-forward", model_wiring.stateless, "quick"),
    _own("embedding-scale", embedding.embedding_scale, "quick"),
    _own("structure", structure.structure, "quick"),
    _own("long-inputs", positional.long_inputs, "quick"),
    _own("decode", decoding.encoder_calls, "quick"),
    _own("decode-determinism", properties.decode_determinism, "quick"),
    _own("decode-consistency", properties.decode_consistency, "quick"),
    _own("decode-batch-rows", decode_batch.batch_rows, "quick"),
    _own("train-trace", training.trace, "quick", side=True),
    _own("overfit", overfit.overfit, "quick", side=True),
    _own("brief-training", decoding.brief_training, "train", side=True),
)
