"""The pack API: what an instructor declares to add an assignment without touching the harness.

Torch-free plain data (the grading process reads it). A pack is one `Pack` object exported by a Python module
and named in the `mtxdiag.packs` entry point group of its distribution's metadata:

    [project.entry-points."mtxdiag.packs"]
    cs231n = "harness.packs.cs231n.pack:PACK"

The engine's generic probes read its `bindings` (each a piece of the student's code bound to a probe *role*, with
the shapes and conventions the course uses: TransformerLens-style, the mapping is data); what no generic role
covers comes as the pack's own probes, causes and mutants, named by dotted paths so that the grading process
never imports the child side's modules (nor torch) to read a pack.

`Assignment` (what the harness reads of every assignment, built in or packed) is declared here, at the bottom of
the house: harness/assignments.py imports it and the discovered packs, so a pack module imports only this
module (`from harness.packs.api import Assignment, Binding, CourseCall, Edition, Mask, NO_COURSE_CHECK, Pack`), never harness.assignments.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping


@dataclass(frozen=True)
class Assignment:
    name: str
    title: str                      # one line: what the student builds (a mutant's exported docstring)
    handed_in: str                  # what a submission is (the Gradescope autograder's README)
    required: tuple[str, ...]       # the contract: names a submission must define (its `contract` check)
    optional: tuple[str, ...] = ()  # names whose checks are skipped when absent
    packages: tuple[str, ...] = ()  # third-party imports it allows besides torch (harness/allowed.py)
    reference: str = ""             # its reference model, under reference_model/
    # A student repository (a repository pack's, Pack.submission "repository": recognised by its first `files`
    # path) or one file of its adapters; loaded by harness/child/lm_loader.py. A folder is checked and graded as
    # such an assignment or as a folder pack's.
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
    # set by discovery (harness/packs/discover.py), never by a pack's author: "module:NAME" of the Pack this
    # assignment comes from (every discovered assignment has one); empty only for an Assignment made outside discovery
    pack: str = ""

    @property
    def markers(self) -> tuple[str, ...]:
        """Names whose definition in a single file makes it this assignment (`detect`)."""
        return self.required


# the generic probe roles a binding may take (harness/child/probes/roles/)
ROLES = ("attention", "positional", "layer", "model", "sampler", "training-step",
         "feed-forward",        # a position-wise feed-forward: forward(x) -> x's shape, token i from token i alone
         "patch-embedding",     # images (N, C, H, W) -> (N, patches, E), token k from patch k (raster order)
         "classifier")          # a model over images: forward(x) -> (N, classes) logits, its encoder unmasked

# what value of a mask blocks attention (Mask.blocks)
MASK_BLOCKS = (
    "false",    # boolean: False blocks (attend where True)
    "true",     # boolean: True blocks (torch.nn.MultiheadAttention's convention)
    "zero",     # 0/1 numbers: 0 blocks (masked_fill(mask == 0, -inf))
    "-inf",     # additive float: -inf (or a large negative) blocks, 0 attends
)


@dataclass(frozen=True)
class Mask:
    """An attention mask's convention: which value blocks, its dtype and its shape (letters of Binding.shapes:
    "TxS" one (query, key) matrix shared by the batch, "NxTxS", "Nx1xTxS")."""
    blocks: str = "zero"
    dtype: str = "any"          # "bool" | "float" | "any" (the course passes either)
    shape: str = "TxS"

    def __post_init__(self):
        if self.blocks not in MASK_BLOCKS:
            raise ValueError(f"Mask.blocks must be one of {MASK_BLOCKS}, not {self.blocks!r}")


# how one of the course's own checks sets a binding up (CourseCall): the mask it passes, the mode it runs in, the
# weights it gives the piece
COURSE_MASKS = ("", "causal", "random")         # none; the lower triangle; about half of the pairs blocked
COURSE_MODES = ("eval", "train")                # train: dropout on, the student's and the reference's runs seeded alike
COURSE_WEIGHTS = ("seeded", "linspace")         # built from the seed; every parameter one evenly spaced range
COURSE_DTYPES = ("float32", "float64")          # the parameters' and the inputs' dtype in the course's check


@dataclass(frozen=True)
class CourseCall:
    """One of the course's own checks of a binding, as the course's notebook or tests make it: the sizes and
    constructor arguments it uses (over the binding's), which call roles it hands the one same tensor (`same`:
    ("query", "key", "value") is self-attention, ("key", "value") attention over other data), the mask, the mode, the
    weights (`linspace`: every parameter set to torch.linspace(lo, hi) over its entries, `span` = (lo, hi)), the
parameters' and inputs' `dtype` (a course that sets its parameters from float64 arrays runs in float64), and the
    course's relative-error bar (`rtol`: max |a - b| / max(1e-8, |a| + |b|)); `seed`: its one fixed draw, as the
    course's check is one fixed draw whatever --seed a check runs with. The replay probe calls the student's
    piece and the reference (given the student's weights) this way: when they agree within the bar, the course's
    check would pass, and a bug found on that piece is one the course's own checks would not have seen."""
    name: str
    shapes: Mapping = field(default_factory=dict)
    init: Mapping = field(default_factory=dict)
    same: tuple[str, ...] = ()
    mask: str = ""
    mode: str = "eval"
    weights: str = "seeded"
    span: tuple[float, float] = (-1.0, 1.0)
    dtype: str = "float32"
    rtol: float = 1e-3
    seed: int = 0               # the check's own fixed draw (weights, inputs, dropout): not the run's --seed

    def __post_init__(self):
        for what, value, allowed in (("mask", self.mask, COURSE_MASKS), ("mode", self.mode, COURSE_MODES),
                                     ("weights", self.weights, COURSE_WEIGHTS), ("dtype", self.dtype, COURSE_DTYPES)):
            if value not in allowed:
                raise ValueError(f"CourseCall.{what} must be one of {allowed}, not {value!r}")
        if not self.rtol > 0:
            raise ValueError("CourseCall.rtol must be positive")


# Binding.course for a piece the course's own notebook or tests never call on its own: declared, not unknown
NO_COURSE_CHECK: tuple[CourseCall, ...] = ()


@dataclass(frozen=True)
class Binding:
    """A piece of the student's code bound to a generic probe role.

    `target` is "module:QualName" inside the submission ("cs231n.transformer_layers:MultiHeadAttention", a method
    "cs231n.classifiers.transformer:CaptioningTransformer.sample"); `component` the course's name for it, which
    every diagnosis, the rubric and the report use. `init` the constructor's keyword arguments as the course's
    checks build it; `call` forward's arguments in order, by role ("query", "key", "value", "mask", "x",
    "features", "captions"); `shapes` the sizes the course uses (N batch, S/T lengths, E/D width, H heads, V
    vocabulary; a patch embedding's and a classifier's: C channels, `image` the image's side, `patch` the patch's
    side, `classes`). `editions`: where the piece exists and is the student's (empty: every edition). `course`: how the
course's own checks call it (CourseCall), so that a report can say which bugs those checks would not have seen;
`NO_COURSE_CHECK` (an empty tuple) declares that the course runs no check of this piece at all (a bug there is one
its checks would not have seen unless a larger piece's check does); None (the default): not declared, unknown."""
    role: str
    component: str
    target: str
    init: Mapping = field(default_factory=dict)
    call: tuple[str, ...] = ()
    shapes: Mapping = field(default_factory=dict)
    mask: Mask | None = None
    formula: str = ""           # positional: the declared table ("sin-even-cos-odd", ...)
    editions: tuple[str, ...] = ()
    points: float = 0.0         # its share of the grade (the rubric's per-component table)
    course: tuple[CourseCall, ...] | None = None    # how the course's own checks call it (the replay probe, `.course`)

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"Binding.role must be one of {ROLES}, not {self.role!r}")
        if ":" not in self.target:
            raise ValueError(f"Binding.target must be 'module:QualName', not {self.target!r}")
        if self.course is not None and (not isinstance(self.course, tuple) or
                                        not all(isinstance(c, CourseCall) for c in self.course)):
            raise ValueError("Binding.course must be a tuple of CourseCall (NO_COURSE_CHECK: the course checks "
                             "none of it) or None (not declared)")


@dataclass(frozen=True)
class Edition:
    """One edition of the course's assignment: how a submission of it is told apart (a name or text its files
    hold: `markers`, path -> substring) and which components are the student's in it."""
    name: str
    markers: Mapping = field(default_factory=dict)
    student: tuple[str, ...] = ()


# what a pack's submission is (Pack.submission)
SUBMISSIONS = (
    "folder",       # the assignment folder (or its files), recognised by `files`, each binding imported from it
    "file",         # one .py/.ipynb file, recognised by the names it defines (`assignment.markers`) and loaded as the
                    # single-file assignments are; it binds nothing: its probes are its own (`probes`), in their order
    "repository",   # a student's repository, recognised by its first `files` path (the course's adapters, which are
                    # its contract: `assignment.required` names them), loaded through them (child/lm_loader.py); it
                    # binds nothing: its probes are its own, in their order. One file of the adapters is accepted too
)


@dataclass(frozen=True)
class Pack:
    """An assignment as a pack. `assignment` is the declaration the harness already reads (name, title, what is
    handed in, the contract names, allowed packages, ...). `files`: paths (relative to the submission folder) whose
    presence recognises a submission of it. `reference`: the dotted module of the team-written reference
    implementation (never the course's code). `probes`, `causes`, `mutants`, `sections`: "module:NAME" of the
    pack's own additions (each optional). `submission` (SUBMISSIONS): a folder (default), one file or a
    repository. A one-file or repository pack's `probes` are every probe its check runs, in order (its contract
    first): each has `id`, `fn(ctx)`, `cost` and may say `side` (trains: may run in the second process) and
    `either` (reads nothing another probe leaves, so either process may run it: child/side.py)."""
    assignment: Assignment
    files: tuple[str, ...] = ()
    editions: tuple[Edition, ...] = ()
    reference: str = ""
    bindings: tuple[Binding, ...] = ()
    probes: str = ""
    causes: str = ""
    mutants: str = ""
    sections: str = ""
    submission: str = "folder"
    # where its probes run (issue 45): "on" split (the student's code in a model server, the probes in a prober that
    # never runs it), "off" in the student's own process, "trial" split only when MTXDIAG_PACK_SPLIT=trial (while
    # the split path is compared with the old one); "" the kind's default: a folder pack "on", the others "off"
    split: str = ""

    @property
    def name(self) -> str:
        return self.assignment.name

    @property
    def is_file(self) -> bool:
        """A one-file pack (`submission` "file")."""
        return self.submission == "file"

    @property
    def is_folder(self) -> bool:
        """A folder pack (`submission` "folder"): the pieces it binds are imported from the assignment folder."""
        return self.submission == "folder"

    @property
    def is_repository(self) -> bool:
        """A repository pack (`submission` "repository"): checked through the course's adapters."""
        return self.submission == "repository"

    def runs_split(self, switch: str = "1") -> bool:
        """Whether its probes run split under the switch's value (isolation/split.SWITCH: "0" none, "1" the packs
        declared "on", "trial" those declared "trial" too)."""
        mode = self.split or ("on" if self.is_folder else "off")
        return switch != "0" and (mode == "on" or mode == "trial" and switch == "trial")

    def binding(self, component: str) -> Binding | None:
        return next((b for b in self.bindings if b.component == component), None)

    def bindings_for(self, edition: str | None) -> tuple[Binding, ...]:
        """The bindings that exist in `edition` (a binding without editions exists in every one; None: all)."""
        return tuple(b for b in self.bindings if not b.editions or edition is None or edition in b.editions)

    def edition(self, name: str | None) -> Edition | None:
        return next((e for e in self.editions if e.name == name), None)
