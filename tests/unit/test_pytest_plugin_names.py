"""pytest --mtxdiag maps course test names to components (in-process); the plugin in a real pytest run: tests/integration/test_pytest_plugin.py."""
from __future__ import annotations

import pytest
from harness.pytest_plugin import component_of


@pytest.mark.parametrize("name, component", [
    ("test_rope", "rope"), ("test_multihead_self_attention_with_rope", "mha_rope"),
    ("test_multihead_self_attention", "mha"), ("test_4d_scaled_dot_product_attention", "sdpa"),
    ("test_transformer_lm_truncated_input", "lm"), ("test_transformer_block", "block"),
    ("test_silu_matches_pytorch", "silu"), ("test_swiglu", "swiglu"), ("test_get_lr_cosine_schedule", "lr_schedule"),
    ("test_cross_entropy[case1]", "cross_entropy"), ("test_unrelated_helper", None), ("helper_rope", None)])
def test_test_names_map_to_components(name, component):
    assert component_of(name) == component
