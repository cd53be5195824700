"""The `reversal` assignment (the lesson's mini encoder-decoder that learns to reverse digit sequences), declared
through the pack API (harness/packs/api.py) as a one-file pack.

A submission is one .py/.ipynb file, recognised by the names it defines (`MiniTransformer`); a file that defines
no assignment's names is checked as this one (harness/assignments.py DEFAULT: the lesson's own). It is loaded as
the single-file assignments are (child/loader.py) and checked by its own probes, in their order
(harness/child/probes/reversal_plan.py). Its reference is reference_model/reversal.py, its mutants
mutants/registry.py's reversal ones, its causes and report sections name it through `harness.assignments.REVERSAL`.
Torch-free data.
"""
from __future__ import annotations

from ..api import Assignment, Pack

ASSIGNMENT = Assignment(
    name="reversal",
    title="A mini encoder-decoder transformer that learns to reverse digit sequences.",
    handed_in="the one .py/.ipynb file",
    required=("MiniTransformer",),
    optional=("make_batch", "PositionalEncoding", "MultiHeadAttention", "FeedForward", "EncoderLayer",
              "DecoderLayer", "padding_mask", "target_mask", "train", "greedy_decode"),
    packages=("numpy", "tqdm", "matplotlib"),
    reference="reversal.py",
    trains=True,
    seq2seq=True,
    must_measure=("overfit", "train-trace"),     # the training probes the verdict reads
)

PACK = Pack(
    assignment=ASSIGNMENT,
    submission="file",
    probes="harness.child.probes.reversal_plan:PROBES",
    mutants="mutants.registry:REVERSAL_MUTANTS",
    split="trial",          # its probes over the model server (issue 45) while compared with the in-process path
)
