"""Measurements of assignment `lm` (CS336 assignment-1 adapters), per component; the decisions are the parent's.

  diagnose.measure_component(component, adapter_fn) -> JSON-able measurements (the first disagreement, the
                                            interface findings, the fingerprint, the properties; no cause)
  diagnose.diagnose_component(component, adapter_fn) -> the diagnosis (status, cause, confidence, evidence):
                                            measure_component, then harness/causes/lm_decide.py's decide
  diagnose.diagnose_adapters({adapter name: fn}) -> every component and the first failing one
  fingerprint.match(component, fn)          the lm mutant whose numbers the adapter reproduces (fingerprint():
                                            the same, decided)
  properties.check(component, fn)            properties every correct implementation has (each with the cause
                                            its failure names and a confidence, as declared data)
  interface.*                                key/argument/dtype/None/bias problems, measured
  rubric.score / rubric.gradescope_tests     per-component partial credit ([lm] in rubric_default.toml)

Where decisions live: one engine, as for reversal and block. In the sandboxed child, the probe
(harness/probes/lm_components.py `diagnose_further`) calls measure_component for a component whose
lm-<component> check fails (every stage is measured; one that could not be is in `not_measured`) and puts
the measurements in the check's `data.lmdiag_measured`. In the parent, engine.validate_payload calls
harness/causes/lm_decide.py `annotate`: it validates the measurements (types, bounds; a cause or mutant id it
does not know is not trusted), runs the cascade (interface -> fingerprint -> swapped arguments -> properties ->
no cause) and writes its decision at `data.lmdiag`, which harness/causes/lm_component.py turns into the
finding. This package imports lm_decide (torch-free) so that in-process callers (the pytest plugin, the
rubric, benches, tests) get the same decision from the same rules. Component names may be spelled either
way (mha-rope or mha_rope). Partial credit: rubric.score({component: diagnosis}).

Cause ids: the lm mutant catalogue's (mutants/lm_registry.py), `interface-mismatch`, and the ones
below, which only properties name (no mutant makes them); the parent trusts no other id from the child
(causes/lm_decide.py `known_causes`). Where the lmcheck branch's property causes name the same thing, the id is theirs (rope-rotates-at-position-0, rope-not-a-rotation,
rope-not-relative, rmsnorm-not-scale-invariant, softmax-not-shift-invariant, future-tokens-visible).
"""
from __future__ import annotations

PROPERTY_CAUSES = {
    "rope-rotates-at-position-0": "RoPE changes vectors at position 0 (the angles are not position x frequency)",
    "rope-not-a-rotation": "RoPE changes the norms of the vectors it rotates",
    "rope-not-relative": "RoPE's q.k scores depend on absolute positions, not on their difference",
    "rope-pairs-wrong": "RoPE mixes coordinates other than the pairs (2i, 2i+1)",
    "rope-frequencies-wrong": "RoPE's rotation angles are not position * theta^(-2k/d)",
    "rmsnorm-uses-std": "RMSNorm divides by the standard deviation (mean subtracted, Bessel-corrected)",
    "rmsnorm-scale-wrong": "RMSNorm's output does not have unit RMS",
    "rmsnorm-gain-before-normalising": "RMSNorm multiplies by the gain before normalising, which divides it back out",
    "rmsnorm-gain-wrong": "RMSNorm's output is not the gain times the normalised input",
    "rmsnorm-not-scale-invariant": "RMSNorm(c x) differs from RMSNorm(x)",
    "rmsnorm-eps-wrong": "RMSNorm's eps is not the one given, or not inside the square root",
    "softmax-normalisation": "softmax's slices along dim do not sum to 1",
    "softmax-not-shift-invariant": "softmax(x + c) differs from softmax(x)",
    "softmax-low-precision": "softmax computed in reduced precision (errors ~1e-3 for float32 inputs)",
    "swiglu-wrong-activation": "the gated feed-forward layer's activation is not SiLU",
    "attention-not-normalised": "attention weights over the keys do not sum to 1",
    "attention-scale-wrong": "attention scores are not scaled by 1/sqrt(d_k)",
    "attention-scaled-by-d-model": "multi-head attention scales scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
    "mask-broadcast-wrong-dim": "the mask is broadcast over an axis the scores do not have",
    "future-tokens-visible": "the output at a position depends on later tokens",
    "mask-after-softmax": "the causal mask is applied after the softmax, so weights do not sum to 1",
    "attention-output-dropped": "the block's output does not contain the attention sub-layer's result",
    "ffn-output-dropped": "the block's output does not contain the feed-forward sub-layer's result",
    "lm-head-tied-to-embeddings": "the logits use the embedding matrix instead of lm_head.weight",
    "lm-head-ignored": "lm_head.weight does not affect the logits",
    "cross-entropy-formula": "cross-entropy is not the mean of logsumexp(logits) - logit[target]",
    "cross-entropy-sum-not-mean": "cross-entropy sums the per-example losses instead of averaging them",
    "clipping-wrong-norm": "clipping scales to a norm other than the joint L2 norm of the gradients",
    "adamw-weight-decay-wrong": "AdamW's decay is not p <- p (1 - lr * wd)",
    "adamw-step-size-wrong": "AdamW's first step does not move parameters by lr",
    "adamw-update-wrong": "AdamW's parameters drift from decoupled decay with bias correction over many steps",
    "adamw-step-counted-per-parameter": "AdamW's step counter advances once per parameter, not once per step",
    "schedule-warmup-integer-division": "the warmup uses integer division: lr is 0 during warmup",
    "schedule-warmup-wrong": "the warmup is not it / T_w * max_lr",
    "schedule-cosine-wrong": "the cosine part does not go from max_lr at T_w to min_lr at T_c",
    "schedule-floor-late": "lr stays at min_lr only from later than T_c",
    "get-batch-windows-not-contiguous": "get_batch rows are not contiguous windows of the data",
    "get-batch-start-range": "get_batch never draws some valid start (the first or the last window)",
}


def cause_ids() -> set[str]:
    """Every cause id a diagnosis can name."""
    from mutants.lm_registry import LM_MUTANTS
    return {m.cause for m in LM_MUTANTS} | set(PROPERTY_CAUSES) | {"interface-mismatch"}
