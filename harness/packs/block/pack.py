"""The `block` assignment ("Transformers & Attention from Scratch": self-attention and a post-norm transformer block
with a causal flag), declared through the pack API (harness/packs/api.py) as a one-file pack.

A submission is one .py/.ipynb file, recognised by the names it defines (`TransformerBlock`); it is loaded as the
single-file assignments are (child/loader.py) and checked by its own probes, in their order
(harness/child/probes/block_plan.py: the contract, the positional table, the causal flag before any probe assumes
it, the attention, the wiring, the training probe on the side). Its reference is reference_model/block.py (the
assignment's `reference`), its mutants mutants/registry.py's block ones, its causes name it through
`harness.assignments.BLOCK` (Cause.assignments), as do its report sections (report/sections.py). Torch-free data.
"""
from __future__ import annotations

from ..api import Assignment, Pack

ASSIGNMENT = Assignment(
    name="block",
    title="Self-attention and a transformer block with a causal flag.",
    handed_in="the one .py/.ipynb file",
    required=("TransformerBlock",),
    optional=("MultiHeadAttention", "positional_encoding"),
    packages=("numpy", "tqdm", "matplotlib"),
    reference="block.py",
    must_measure=("block-lm",),                 # its training probe
)

PACK = Pack(
    assignment=ASSIGNMENT,
    submission="file",
    probes="harness.child.probes.block_plan:PROBES",
    mutants="mutants.registry:BLOCK_MUTANTS",
    split="on",             # its probes over the model server (issue 45); MTXDIAG_PACK_SPLIT=0: in one process
)
