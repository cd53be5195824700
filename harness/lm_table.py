"""The `lm` component table, without torch: the parent's rules (harness/causes/lm_component.py) need it, and
the parent must not pay torch's import (~1.3 s) to read a table. The child's probes read it through
harness/child/probes/lm/common.py. The one table: the checks (checks.py), the lmdiag engine (lmdiag/inputs.py, in the
mutant registry's spelling: `registry_name`), the mutants (mutants/lm_registry.py) and the report read it."""
from __future__ import annotations

# (component, adapter, components it is normally built from) in the assignment's build order.
COMPONENTS = (
    ("linear", "run_linear", ()),
    ("embedding", "run_embedding", ()),
    ("rmsnorm", "run_rmsnorm", ()),
    ("silu", "run_silu", ()),
    ("swiglu", "run_swiglu", ("linear", "silu")),
    ("softmax", "run_softmax", ()),
    ("sdpa", "run_scaled_dot_product_attention", ("softmax",)),
    ("rope", "run_rope", ()),
    ("mha", "run_multihead_self_attention", ("linear", "sdpa")),
    ("mha-rope", "run_multihead_self_attention_with_rope", ("mha", "rope")),
    ("block", "run_transformer_block", ("rmsnorm", "swiglu", "mha-rope")),
    ("lm", "run_transformer_lm", ("embedding", "block", "rmsnorm", "linear")),
    ("cross-entropy", "run_cross_entropy", ()),
    ("adamw", "get_adamw_cls", ()),
    ("lr-schedule", "run_get_lr_cosine_schedule", ()),
    ("gradient-clipping", "run_gradient_clipping", ()),
    ("get-batch", "run_get_batch", ()),
)
ADAPTER = {c: a for c, a, _ in COMPONENTS}
DEPS = {c: d for c, _, d in COMPONENTS}
NAMES = tuple(ADAPTER)
# lmdiag/inputs.py seeds each component's inputs with its position in this order (frozen: the tolerances and
# fingerprints were measured on those inputs; the order differs from the build order above only here)
SEED_ORDER = tuple(NAMES[i] for i in (0, 1, 3, 4, 2, 5, 6, 7, 8, 9, 10, 11, 12, 15, 13, 14, 16))


def registry_name(component: str) -> str:
    """The mutant registry's and lmdiag's spelling (mha_rope) of a component (mha-rope)."""
    return component.replace("-", "_")
