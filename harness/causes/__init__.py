"""Every cause the engine can name, in one readable tuple (order breaks ties in confidence).

Each module holds one cause: its document (CAUSE) and its rule (diagnose).
"""
from __future__ import annotations

from . import (attention_renormalised, attention_shared, bad_output_init, causal_bias_symmetric, causal_diagonal_masked,
               causal_flag_ignored, check_not_measured, causal_mask_inverted, causal_mask_missing, causal_mask_off_by_one,
               cross_attention_swapped, data_digits_missing, data_not_reversed, decode_stops_early,
               dropout_at_inference, dropout_on_masked_scores, dropout_on_residual_stream, encoder_in_decode_loop, eval_mode_training, feed_forward_linear,
               forbidden_operation, gradients_not_zeroed, gradients_zeroed_before_step, heads_split_wrong,
               inf_mask_nan, layers_shared, learning_rate_too_low, lm_component, lm_training, load_failures,
               make_batch_malformed, mask_after_softmax, missing_embedding_scale, missing_residual,
               missing_sqrt_dk, no_gradient_flow, no_warmup, optimizer_missing_parameters, pad_not_ignored,
               padding_mask_inverted, padding_mask_missing, piece_absent, piece_not_implemented,
               positional_encoding_formula,
               positional_encoding_trainable, positional_max_len, scheduler_not_stepped, softmax_wrong_dim,
               source_ignored, stale_mask, tampering, target_not_shifted, view_not_contiguous,
               warmup_flat_then_jump)
from . import (attention_dropout_in_eval, attention_dropout_misplaced, attention_mask_ignored, attention_mask_inverted,
               attention_mask_misapplied, attention_mask_nan, positional_dropout_lost, positional_dtype_cast, attention_scale_missing, causal_mask_wrong, heads_merged_wrong,
               positional_in_place, positional_not_added, positional_table_wrong, value_from_key)
from . import encoder_attention_masked, feed_forward_dropout_wrong, patch_layout_wrong
from . import (constructor_signature, layer_dropout_wrong, layer_fails_without_mask, layer_mask_not_passed,
               layer_sublayer_order, mask_batch_axes, positional_added_twice)
from ..assignments import REPOSITORY
from .base import Cause

RULES = (
    tampering,  # first: when the checks were interfered with, nothing else they say can be trusted
    forbidden_operation,
    dropout_at_inference,  # a random forward pass makes every comparison of two passes fail
    target_not_shifted, causal_mask_inverted, causal_mask_missing, causal_mask_off_by_one, mask_after_softmax,
    dropout_on_masked_scores,
    attention_renormalised, causal_diagonal_masked, missing_sqrt_dk, no_gradient_flow, learning_rate_too_low,
    inf_mask_nan, view_not_contiguous, cross_attention_swapped, source_ignored, positional_max_len, stale_mask,
    no_warmup, warmup_flat_then_jump, softmax_wrong_dim, data_not_reversed, make_batch_malformed, positional_encoding_formula,
    positional_encoding_trainable, missing_embedding_scale, bad_output_init, missing_residual, dropout_on_residual_stream,
    encoder_in_decode_loop, padding_mask_inverted, padding_mask_missing, pad_not_ignored, heads_split_wrong,
    gradients_not_zeroed, gradients_zeroed_before_step, eval_mode_training, scheduler_not_stepped,
    optimizer_missing_parameters, data_digits_missing, decode_stops_early, layers_shared, attention_shared,
    feed_forward_linear, causal_flag_ignored, causal_bias_symmetric,
    # the generic role probes' causes (any pack): a random eval pass first, then the mechanisms that explain others
    constructor_signature,   # a piece that cannot be built as the contract builds it: every check of it errs
    attention_dropout_in_eval, heads_merged_wrong, attention_mask_nan, attention_mask_inverted,
    attention_mask_ignored, value_from_key, attention_scale_missing, attention_dropout_misplaced,
    positional_not_added, positional_in_place, positional_table_wrong, positional_dtype_cast, positional_dropout_lost,
    mask_batch_axes, causal_mask_wrong, attention_mask_misapplied, positional_added_twice,
    feed_forward_dropout_wrong, patch_layout_wrong, encoder_attention_masked,   # the pieces the layers are built on
    layer_fails_without_mask, layer_mask_not_passed, layer_sublayer_order, layer_dropout_wrong,
    piece_absent, piece_not_implemented,   # a pack's assignment (any pack): pieces not there, not written yet
) + lm_component.RULES + lm_training.RULES + (   # lm: objects, one per component and kind of failure
    check_not_measured,  # last: a required check that could not be measured
)


def _first_per_id(causes) -> tuple:
    """One Cause per id, the first: lm reuses missing-module, forward-error and the lessons' bug ids."""
    out: dict[str, Cause] = {}
    for c in causes:
        out.setdefault(c.id, c)
    return tuple(out.values())


# the single-file assignments' causes first, then the repository assignment's (lm)
CAUSES = _first_per_id(tuple(m.CAUSE for m in RULES if m.CAUSE.assignments != REPOSITORY) + load_failures.CAUSES
                       + tuple(m.CAUSE for m in RULES) + lm_component.CAUSES)
BY_ID = {c.id: c for c in CAUSES}
