"""The assignments, declared once: what each is, how a submission of it is recognised and handed in, what it
must define, what it may import, how it is graded and which report sections belong to it.

Torch-free plain data (both sides import it; it imports only lm_table, itself torch-free data). The CLI, the
engine, the grader, the rubric, Gradescope and the report ask `assignment_of(name)` a question
(`.is_repository`, `.per_component`, `.trains`, `.rubric_table`, ...) instead of comparing names;
`protocol.ASSIGNMENTS` is `NAMES` here. What belongs to an assignment elsewhere names it through these objects:
a probe's `assignments` (harness/child/probes/__init__.py), a cause's (harness/causes/*.py), a mutant's
(mutants/), a report section's (harness/report/sections.py).

A new assignment: one `Assignment(...)` below and a place in `ALL`; then its probes, causes, mutants, reference
(`reference_model/<reference>`) and report sections name it (ARCHITECTURE.md, "An assignment").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .lm_table import ADAPTER

# the folder a course's student repository is recognised by (its adapters: the contract the course tests)
REPOSITORY_MARKER = "tests/adapters.py"


@dataclass(frozen=True)
class Assignment:
    name: str
    title: str                      # one line: what the student builds (a mutant's exported docstring)
    handed_in: str                  # what a submission is (the Gradescope autograder's README)
    required: tuple[str, ...]       # the contract: names a submission must define (its `contract` check)
    optional: tuple[str, ...] = ()  # names whose checks are skipped when absent
    packages: tuple[str, ...] = ()  # third-party imports it allows besides torch (harness/allowed.py)
    reference: str = ""             # its reference model, under reference_model/
    # A student repository (REPOSITORY_MARKER) or one file of its adapters; loaded by harness/child/lm_loader.py.
    # A folder is checked and graded only as such an assignment.
    is_repository: bool = False
    # graded, ordered and reported per component (harness/lm_table.py): the rubric's table `rubric_table`,
    # one Gradescope test per component, the report's component checklist
    per_component: bool = False
    rubric_table: str | None = None
    # its full check trains the student's model briefly; the report draws the reference's curves beside it
    trains: bool = False
    # the model is called as model(src, tgt_in) and must return (batch, target length, vocabulary) logits
    seq2seq: bool = False
    # grader modules are hidden from sys.modules while its student code runs (harness/child/hide.py)
    hides_grader: bool = True
    # the probes (their ids: harness/checks.py DECLARED) a full check must measure for its verdict to be whole:
    # one of theirs skipped because it could not be measured (not because the part is absent or not implemented)
    # is listed in the summary and keeps the verdict from `clean` (checks.not_measured, causes/check_not_measured)
    must_measure: tuple[str, ...] = ()

    @property
    def markers(self) -> tuple[str, ...]:
        """Names whose definition in a single file makes it this assignment (`detect`)."""
        return self.required


REVERSAL = Assignment(
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
BLOCK = Assignment(
    name="block",
    title="Self-attention and a transformer block with a causal flag.",
    handed_in="the one .py/.ipynb file",
    required=("TransformerBlock",),
    optional=("MultiHeadAttention", "positional_encoding"),
    packages=("numpy", "tqdm", "matplotlib"),
    reference="block.py",
    must_measure=("block-lm",),                 # its training probe
)
LM = Assignment(
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

# detection order: the first whose markers a single file defines (an lm file defines its adapters; a
# reversal file may define a TransformerBlock too); a file that defines none is checked as DEFAULT
ALL: tuple[Assignment, ...] = (REVERSAL, BLOCK, LM)
DETECT_ORDER: tuple[Assignment, ...] = (LM, REVERSAL, BLOCK)
DEFAULT = REVERSAL
NAMES: tuple[str, ...] = tuple(a.name for a in ALL)
BY_NAME: dict[str, Assignment] = {a.name: a for a in ALL}
SINGLE_FILE: tuple[str, ...] = tuple(a.name for a in ALL if not a.is_repository)
REPOSITORY: tuple[str, ...] = tuple(a.name for a in ALL if a.is_repository)
AUTO = "auto"                          # the CLI's choice: detect it
CHOICES: tuple[str, ...] = (AUTO,) + NAMES

# what an unknown name (None, "auto", a result's garbage) answers: no to every question
UNDECLARED = Assignment(name="", title="", handed_in="", required=(), hides_grader=True)


def assignment_of(name: object) -> Assignment:
    """The declared assignment called `name`; UNDECLARED (no to every question) for anything else."""
    return BY_NAME.get(name, UNDECLARED) if isinstance(name, str) else UNDECLARED


def detect(defines: Callable[[str], bool]) -> str:
    """The assignment a loaded single file is, from the names it defines (`defines(name)`)."""
    return next((a.name for a in DETECT_ORDER if any(defines(n) for n in a.markers)), DEFAULT.name)


def for_folder(asked: str) -> str | None:
    """The assignment a folder (a repository) is checked as when `asked` was asked; None: a folder cannot be."""
    if asked == AUTO:
        return REPOSITORY[0] if len(REPOSITORY) == 1 else None
    return asked if assignment_of(asked).is_repository else None
