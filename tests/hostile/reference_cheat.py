# hostile: submits the grader's own reference solution instead of writing one
# base: none
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
import torch  # noqa: F401
from reference_model.reversal import MiniTransformer, MultiHeadAttention, PositionalEncoding  # noqa: F401
