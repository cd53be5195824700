"""The `lm` assignment (the decoder-only language model of Stanford CS336 assignment 1), declared through the pack
API (harness/packs/api.py) as a repository pack.

A submission is the student's repository, recognised by the course's adapters (`files`: tests/adapters.py, whose
functions are the contract), or one file of those adapters. It is loaded through the adapters
(child/lm_loader.py) and checked by its own probes, one per component in the build order
(harness/child/probes/lm/plan.py); it is graded, ordered and reported per component (harness/lm_table.py, the
rubric's `lm` table). Its reference is reference_model/lm.py; its mutants are mutants/lm_registry.py's. Torch-free
data.
"""
from __future__ import annotations

from ...lm_table import ADAPTER
from ..api import Assignment, Pack

ASSIGNMENT = Assignment(
    name="lm",
    title="The decoder-only language model of Stanford CS336 assignment 1, through its test adapters.",
    handed_in="the repository holding tests/adapters.py, graded per component",
    required=tuple(ADAPTER.values()),       # the adapters, in build order (the report's checklist follows it)
    # what CS336 assignment 1's repositories import in model code (pyproject's `lm` extra)
    packages=("einops", "einx", "jaxtyping", "numpy", "regex", "tqdm"),
    reference="lm.py",
    is_repository=True,
    per_component=True,
    rubric_table="lm",
    # not yet: lmdiag's measurements inside a student call then lose properties (get-batch-start-range,
    # measured); lm keeps the contract-name and model-part checks (grader_reach)
    hides_grader=False,
    # every component's check and the brief training (a full check's; --quick does not run it)
    must_measure=tuple(f"lm-{c}" for c in ADAPTER) + ("lm-training",),
)

PACK = Pack(
    assignment=ASSIGNMENT,
    submission="repository",
    files=("tests/adapters.py",),           # what recognises the repository: the course's adapters
    probes="harness.child.probes.lm.plan:PROBES",
    mutants="mutants.lm_registry:LM_MUTANTS",
)
