"""Declared checks: every check id a probe may emit, what it measures, its threshold and where that came from.

Probes emit checks; this table declares them (the probe id that emits each, in harness/child/probes/__init__.py,
is the key). The rubric validates check ids against it, the engine reads `component` (a check that calls a
contract component directly) and `compares` (a check that compares two forward passes, meaningless when the
forward pass is random), and tests assert that probes emit nothing undeclared. Torch-free: the grading
process imports it. Calibration numbers: bench/calibrate.py and bench/corpus.py (correct corpus, 5 seeds).
"""
from __future__ import annotations

from dataclasses import dataclass

from . import lm_table
from .assignments import PACKS, assignment_of
from .packs.checks import declared as _role_checks


def num(v: float) -> str:
    """A declared number as the texts write it: 0.62, 2.4, 1e-4, 400."""
    if v and abs(v) <= 1e-3:
        mantissa, exp = f"{v:e}".split("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{int(exp)}"
    return f"{v:g}"


@dataclass(frozen=True)
class Bound:
    """A threshold held as a value: the probe compares with it and every text that states it renders it.

    Both ends: a closed range, written "2.4-6.5". One end: strictly above `lo` ("> 1e-3") or below `hi`
    ("< 1e-4"); `closed` makes it <= / >=."""
    lo: float | None = None
    hi: float | None = None
    closed: bool = False

    def __post_init__(self):
        if self.lo is None and self.hi is None:
            raise ValueError("a Bound needs lo, hi or both")

    def ok(self, x: float) -> bool:
        lo, hi = self.lo, self.hi
        if lo is not None and hi is not None:
            return lo <= x <= hi
        if hi is not None:
            return x <= hi if self.closed else x < hi
        assert lo is not None       # __post_init__
        return x >= lo if self.closed else x > lo

    def __str__(self) -> str:
        lo, hi = self.lo, self.hi
        if lo is not None and hi is not None:
            return f"{num(lo)}-{num(hi)}"
        if hi is not None:
            return f"{'<=' if self.closed else '<'} {num(hi)}"
        assert lo is not None       # __post_init__
        return f"{'>=' if self.closed else '>'} {num(lo)}"


def Range(lo: float, hi: float) -> Bound:
    return Bound(lo, hi)


@dataclass(frozen=True)
class Check:
    """`threshold` is a Bound where the check compares a number (the probe reads it: `bound(id)`), prose
    where it compares something else. `correct`: the spread correct code measured (the report's 'expected'
    and the figures draw it); `values`: other numbers the probe runs with and the texts state."""
    id: str
    measures: str
    threshold: str | Bound = ""
    source: str = ""              # where the threshold comes from
    component: str | None = None  # a contract component the check calls directly (not the whole model)
    compares: bool = False        # compares two forward passes
    correct: Bound | None = None
    values: tuple = ()            # (name, value) pairs

    @property
    def bound(self) -> Bound | None:
        return self.threshold if isinstance(self.threshold, Bound) else None

    @property
    def text(self) -> str:
        """The threshold as every text states it."""
        return str(self.threshold)


C = Check
DECLARED: dict[str, tuple[Check, ...]] = {
    "contract": (C("contract", "required and optional names defined at the top level", "all required present",
                   "the lesson's contract"),),
    "shapes": (C("shapes", "logits shape of one forward pass (batch 2)", "(B, T_tgt, 13)", "the contract"),),
    "param-count": (C("param-count", "parameters per component", "info only", "lesson's table 235,981"),),
    "data": (C("data", "make_batch: targets are SOS + reversed source + EOS, padded", "all samples",
               "the lesson's task"),
             C("data-digits", "make_batch: every digit 0-9 appears in ~1,800 sampled source digits", "none missing",
               "a digit drawn with probability >= 1% is missing with probability < 1e-8")),
    "pe": (C("pe-formula", "max |positional table - sin/cos of the lesson|", Bound(hi=1e-5), "float32 noise",
             component="PositionalEncoding"),
           C("pe-buffer", "positional table is a buffer, not a trained parameter", "no Parameter",
             "the lesson", component="PositionalEncoding"),
           C("pe-relative", "block: PE(t+k) is a fixed rotation of PE(t)", "error < 1e-3", "float32 noise")),
    "eval-determinism": (C("eval-determinism", "relative difference of two eval-mode passes (default dropout)",
                           "0 exactly", "a correct eval pass is deterministic on CPU"),),
    "batch-independence": (C("batch-independence", "relative change of sample 0 when the other samples change",
                             Bound(hi=1e-5), "correct corpus: 0 (bitwise) over 5 seeds; float noise ~1e-7",
                             compares=True),),
    "first-loss": (C("first-loss", "cross-entropy of the untrained model on 64 samples", Range(2.4, 6.5),
                     "below: ln 13 = 2.565 (a zero-initialised output layer, correct) minus a margin; leaking labels "
                     "pull it under 2. Above: between the correct corpus's 4.92 (output weights tied to N(0, 1) "
                     "embeddings, logit std 1.7) and bad output layers' 12-17 (bench/corpus.py, 5 seeds)",
                     correct=Range(2.57, 4.92)),),
    "attn-rows-sum": (C("attn-rows-sum", "|sum over the keys - 1| of the weights multiplied with V "
                        "(key axis found by its length in cross-attention)", Bound(hi=1e-4), "float32 noise ~1e-7",
                        compares=True),),
    "attn-saturation": (C("attn-saturation", "mean largest attention weight per row at init", Bound(hi=0.62),
                          "between correct code (70 runs of 14 implementations, bench/calibrate.py) and the "
                          "unscaled mutant's unscaled (10 seeds), with a margin on both sides",
                          correct=Range(0.23, 0.46), values=(("unscaled", Range(0.75, 0.81)),)),),
    "heads-permutation": (C("heads-permutation", "max |MHA(Px) - P MHA(x)|", Bound(hi=1e-4), "float32 noise",
                            component="MultiHeadAttention", compares=True),),
    "causal-leak": (C("causal-leak", "max change of earlier outputs when a later decoder token changes",
                      Bound(hi=1e-5), "correct: 0 (bitwise)", compares=True),),
    "causal-leak-train": (C("causal-leak-train", "max change of earlier outputs in train mode (dropout p, the same "
                            "dropout masks in both passes) when a later decoder token changes", Bound(hi=1e-5),
                            "correct: 0 (bitwise): a dropout after the softmax keeps a masked weight at 0; one on "
                            "the masked scores turns some masked entries into 0, real weight", compares=True,
                            values=(("dropout", 0.3), ("masked_below", -1e4))),),
    "padding-invariance": (C("padding-invariance", "change of real positions' logits when padded to length 10",
                             Bound(hi=1e-4), "correct corpus < 1e-5", compares=True),),
    "padded-row-finite": (C("padded-row-finite", "finite logits and gradients with an all-PAD source row",
                            "finite", "-inf masks give NaN there"),),
    "gradient-flow": (C("gradient-flow", "parameters of modules that ran without a non-zero gradient", "none",
                        "every used parameter must learn"),),
    "residual": (C("residual-enc", "EncoderLayer with Linear weights zeroed: output spread over positions",
                   Bound(lo=1e-3), "reference ~1; missing residual 0", component="EncoderLayer"),
                 C("residual-dec", "DecoderLayer with Linear weights zeroed: output spread over positions",
                   Bound(lo=1e-3), "reference ~1; missing residual 0", component="DecoderLayer")),
    "residual-train": (C("residual-train", "EncoderLayer and DecoderLayer with Linear weights zeroed (the sublayers "
                         "add nothing), dropout p: largest change of the output from eval mode to train mode",
                         Bound(hi=1e-5), "correct: 0 (dropout of a zero sublayer output is zero; the skip path is "
                         "not dropped); dropout on the stream after the add and the norm changes a share p of "
                         "the values to 0", compares=True, values=(("dropout", 0.3),)),),
    "cross-wiring": (C("source-sensitivity", "mean change of logits when every source token changes", Bound(lo=1e-4),
                       "correct ~0.1-1"),
                     C("cross-attn-wiring", "encoder output used as key/value (not query) of cross-attention",
                       "kv in every decoder layer, never query", "the lesson")),
    "stateless-forward": (C("stateless-forward", "change of the output for batch B after seeing batch A",
                            Bound(hi=1e-5), "correct: 0", compares=True),),
    "embedding-scale": (C("embedding-scale", "std of the token part / std of the positional part where the PE adds "
                          "them, and the factor from the embedding's lookup to it",
                          "> 0.8, or a factor >= sqrt(d)/2", "reference 2.5 (factor 8); missing scale 0.31 "
                          "(factor 1); GPT-2 init with x sqrt(d) ~0.2 (factor 8)"),),
    "structure": (C("distinct-layers", "entries of one ModuleList/Sequential that are one object or share a "
                                       "parameter", "0", "the contract: n layers"),
                  C("distinct-attention", "attention modules called in two roles (self and cross) in one pass",
                    "none", "the contract: a decoder layer has two attention modules"),
                  C("ffn-nonlinear", "|f(a+b) - f(a) - f(b) + f(0)| / |f(a+b) - f(0)| of the feed-forward",
                    ">= 1e-4", "affine maps ~1e-7 (float32); ReLU/GELU feed-forwards at init ~0.1-1")),
    "block-causal-off": (C("block-causal-off", "largest change of an earlier output when a later token changes, "
                                               "causal off", "> 1e-6", "correct: O(0.1); a block that ignores "
                                               "causal=False: 0 exactly"),),
    "block-structure": (C("ffn-nonlinear", "|f(a+b) - f(a) - f(b) + f(0)| / |f(a+b) - f(0)| of the feed-forward",
                          ">= 1e-4", "affine maps ~1e-7 (float32); ReLU/GELU feed-forwards at init ~0.1-1"),),
    "long-inputs": (C("long-inputs", "forward on sequences up to max_len", "runs", "the contract's max_len",
                      compares=True),),
    "decode": (C("decode-encoder-calls", "model.encode calls per greedy_decode", "1", "the lesson"),
               C("decode-eval", "greedy_decode leaves the model in eval mode", "eval", "the lesson")),
    "decode-determinism": (C("decode-determinism", "greedy_decode twice with different seeds", "same tokens",
                             "greedy decoding does not sample", compares=True),),
    "decode-consistency": (C("decode-consistency", "first step where greedy_decode's token differs from the "
                                                   "argmax of the model's forward pass on that prefix", "-1 (none)",
                             "the same model, the same prefix", compares=True),),
    "decode-batch-rows": (C("decode-batch-rows", "rows of a batch of 8 equal-length sources whose greedy tokens "
                                                 "(up to EOS) differ from the source decoded alone", "0",
                            "decoding a row does not depend on the other rows", compares=True),),
    "train-trace": (C("train-runs-model", "forward passes of the model given to train() during its optimizer steps",
                      "> 0", "train(model) trains that model"),
                    C("lr-schedule", "learning rate at each optimizer step of train()", Bound(lo=5e-5, closed=True),
                      "the peak; and a warmup (the first step's lr at most first_share of the peak), the lesson's "
                      "schedule: linear from lesson_peak / lesson_warmup to lesson_peak at step lesson_warmup",
                      values=(("first_share", 0.2), ("lesson_peak", 1e-3), ("lesson_warmup", 400))),
                    C("lr-warmup-ramp", "largest rise of train()'s lr between two consecutive optimizer steps, as "
                      "a share of its peak, after the lr stayed under half the peak for min_flat steps or more",
                      Bound(hi=0.5, closed=True), "a warm-up ramps: linear over the lesson's 400 steps rises 1/400 "
                      "of the peak a step, a per-epoch or stepwise ramp at most half; an integer-division factor "
                      "(step // warmup) holds 0 for the whole warm-up, then rises by the whole peak at once",
                      values=(("min_flat", 10), ("flat_below", 0.5))),
                    C("train-shift", "the loss target is the decoder input shifted by one", "shifted", "the lesson"),
                    C("train-pad-ignored", "gradient of the loss at PAD targets", "0", "ignore_index=PAD"),
                    C("train-zero-grad", "gradient the optimizer steps with vs the fresh gradient of that step",
                      "equal (< 1e-4 relative)", "zero_grad or set_to_none before backward"),
                    C("train-optimizer-params", "trainable parameters no optimizer param group holds", "0",
                      "a parameter left out is never trained"),
                    C("train-finite", "first step whose loss gradient is NaN/inf in train()", "none",
                      "any NaN stops learning"),
                    C("train-mode", "share of optimizer steps whose forward ran in eval mode", "<= 0.5",
                      "dropout must be on while training; periodic evaluation is fine"),
                    C("train-scheduler", "advance of the loop's LR scheduler over >= 10 optimizer steps", "> 0",
                      "a scheduler that is never stepped leaves the lr at its initial value")),
    "overfit": (C("overfit", "loss on one batch of 8 at the first step under the pass line, else after max_steps",
                  Bound(hi=0.05), "correct code memorises in correct_steps steps (150 runs, 5 seeds, "
                  "bench/calibrate.py --corpus); max_steps is 3.3x its slowest", compares=True,
                  values=(("max_steps", 400), ("correct_steps", Range(27, 120)), ("lr", 1e-3), ("batch", 8))),),
    "brief-training": (C("brief-training", "mean loss of the last 20 steps of the brief training", "info",
                         "pictures only", values=(("steps", 300), ("batch", 24), ("last", 20))),
                       C("decode-accuracy", "exact-match reversal after brief training", "info", "pictures only"),
                       C("cross-attn-pattern", "cross-attention mass on the anti-diagonal", "info",
                         "the reference's measured brief training (reference_model/brief_training.json)")),
    "block-rows-sum": (C("block-rows-sum", "|row sum - 1| of attention weights", "< 1e-4", "float32 noise"),),
    "block-saturation": (C("block-saturation", "mean largest weight per row at init", Bound(hi=0.22),
                           "between correct code and the unscaled mutant's 0.40-0.49", correct=Range(0.10, 0.12)),),
    "block-permutation": (C("block-permutation", "permutation equivariance without PE", "< 1e-4", "float32 noise",
                            component="MultiHeadAttention"),),
    "block-causal": (C("block-causal", "dependence of earlier outputs on later inputs with causal on", "< 1e-5",
                       "correct: 0"),),
    "block-residual": (C("block-residual", "block output with Linear weights zeroed", "> 1e-3", "reference ~1"),),
    "block-lm": (C("block-lm", "tiny causal LM loss after brief training", "info/threshold in probe",
                   "block.py comments"),),
    # written by the child's guard and the parent, not by a probe
    "tamper": (C("tamper", "functions the checks rely on replaced by the student's code", "none", "security"),),
    "result-channel": (C("result-channel", "lines on the result pipe not from the grader", "none", "security"),),
    "isolation": (C("isolation", "what the run changed outside itself (its warm worker), frame or heap "
                                 "introspection reported as it happened, locations outside the submission",
                     "none", "security"),),
    "tamper-static": (C("tamper-static", "code in the file that reaches into the grader", "none", "security"),),
    "forbidden-ops": (C("forbidden-ops", "audited attempts (network, files outside the submission, processes, "
                                         "ctypes, sys.modules) with the student's line", "none",
                        "PEP 578 audit hook in the child"),),
    "submission-files": (C("submission-files", "files of the submission left out of the check (depth, number and "
                                               "size limits)", "info", "grade_discovery, repo_copy: bounded walks"),),
    "output-flood": (C("output-flood", "bytes the submission printed", "<= 1 MB (--output-mb)",
                       "an instructor should know; output is kept up to 256 KB"),),
}

# lm (CS336 adapters): one check per component against the reference, and the properties that say how
LM_COMPONENTS = lm_table.NAMES
DECLARED.update({f"lm-{c}": (C(f"lm-{c}", f"max abs / relative error of the {c} adapter against the reference on "
                                           "seeded inputs of several shapes (trained weights too for block, lm)",
                               "100x the reference's float32-vs-float64 error, with a floor per component",
                               "probes/lm_common.py: measured float32 vs float64 spreads"),) for c in LM_COMPONENTS})
DECLARED.update({
    "contract": DECLARED["contract"] + (C("lm-imports", "imports of the student's package that failed", "info",
                                          "placeholders raise only when used"),
                                        C("lm-out-of-scope", "tokenizer/BPE/checkpoint adapters", "info",
                                          "issue 12: out of scope"),
                                        C("lm-environment", "imports a newer Python has (bound from "
                                          "typing_extensions)", "info", "the grader's Python, not the student")),
    "lm-rope-properties": (C("lm-rope-identity-at-0", "max |RoPE(x, 0) - x|", "float32 noise", "identity at 0"),
                           C("lm-rope-norm", "max ||RoPE(x)| - |x||", "float32 noise", "a rotation keeps norms"),
                           C("lm-rope-relative", "q_m.k_n against q_(m+s).k_(n+s)", "float32 noise",
                             "RoPE is relative")),
    "lm-rmsnorm-properties": (C("lm-rmsnorm-scale", "RMSNorm(10x) vs RMSNorm(x)", "float32 noise",
                                "scale invariance"),
                              C("lm-rmsnorm-per-token", "one token's output when another changes", "0",
                                "tokens are normalised on their own")),
    "lm-softmax-properties": (C("lm-softmax-shift", "softmax(x + 100) vs softmax(x); finite at + 1000",
                                "float32 noise", "shift invariance"),),
    "lm-training": (C("lm-training", "the TransformerLM trained with the student's AdamW, cross-entropy, get_batch, "
                                     "clipping and schedule: first loss, one batch overfit, the corpus curve against "
                                     "the reference's on the same batches, the first non-finite value",
                      "|first - ln V| <= 1; one batch under 1.0 in 40 steps; curve within 2e-2 relative",
                      "probes/lm_train_brief.py: reference and correct corpus, seeds 0-4"),),
    "lm-parameters": (C("lm-parameters", "tensors the TransformerLM's forward pass trains through (autograd's leaves) "
                                         "that model.parameters() does not hold", "0",
                        "an optimizer built over model.parameters() never trains the rest"),),
    "lm-causal": tuple(C(f"lm-{c}-causal", f"{c}: change of outputs before the last position when the last token "
                                           "changes", "0", "causal attention") for c in ("mha", "mha-rope", "block",
                                                                                         "lm")),
})

# every pack's role checks (harness/packs/checks.py: one declaration per role, per bound component), and per bound
# component its `.role` check: the skip a binding whose role no generic probe covers reports (child/probes/packs.py)
for _pack in PACKS.values():
    DECLARED.update({pid: tuple(C(c[0], c[1], c[2], c[3], component=c[4]) for c in cs)
                     for pid, cs in _role_checks(_pack).items()})
    DECLARED.update({f"{b.component}.role": (C(f"{b.component}.role", f"{b.component}: whether a generic probe "
                                                "covers its role", "covered", "packs/api.py ROLES"),)
                     for b in _pack.bindings})

BY_ID: dict[str, Check] = {c.id: c for checks in DECLARED.values() for c in checks}
PROBE_OF = {c.id: probe for probe, checks in DECLARED.items() for c in checks} | {p: p for p in DECLARED}


def passes(after: dict, targets) -> bool:
    """Every target check (an id) passes in `after` ({id: check}); a target reported under another id now (a
    probe's error check became its checks) counts by its probe: all of that probe's checks pass. A repair is
    verified by this (repair/verify.py), and its re-check stops early by it (Limits.gate, child_side.gate_fails)."""
    for t in targets:
        if t in after:
            if after[t]["status"] != "pass":
                return False
        else:
            mine = [c for i, c in after.items() if PROBE_OF.get(i, i) == PROBE_OF.get(t, t)]
            if not mine or any(c["status"] != "pass" for c in mine):
                return False
    return True


def known_ids() -> set[str]:
    """Every id that may appear in a result's checks: declared checks and probe ids (a skip or error of a probe)."""
    return set(BY_ID) | set(DECLARED)


def bound(check_id: str) -> Bound:
    """The declared threshold a probe compares with (KeyError/TypeError when the check declares none)."""
    b = BY_ID[check_id].bound
    if b is None:
        raise TypeError(f"{check_id} declares no numeric threshold")
    return b


def spread(check_id: str) -> Bound:
    """The spread correct code measured, as the figures draw it (TypeError when the check declares none)."""
    b = BY_ID[check_id].correct
    if b is None:
        raise TypeError(f"{check_id} declares no spread of correct code")
    return b


def value(check_id: str, name: str):
    """A declared number the probe runs with (overfit's max_steps, brief training's steps)."""
    return dict(BY_ID[check_id].values)[name]


def component_of(check_id: str) -> str | None:
    c = BY_ID.get(check_id)
    return c.component if c else None


# Why a check skipped: its part is absent or not implemented (the contract and the component checklist say so)
ABSENT_KINDS = ("absent", "not-implemented")
ABSENT_STATUS = ("missing", "not implemented")


def not_measured(result: dict) -> list[dict]:
    """The checks of the assignment's required probes (Assignment.must_measure) that this result skipped for a
    reason other than their part being absent or not implemented, in the result's order:
    [{"id", "why", "explained", "location"}].

    Not explained: the harness could not measure it (data `could_not_measure` or `harness_error`: the brief
    training could not find or call the model, a probe's own code failed), unless the student's code raised there
    (kind "error") and another required check fails or errs, which reports that exception. Explained: the probe's
    own reason by design (a name it needs is absent, an argument the part lacks)."""
    want = set(assignment_of(result.get("assignment")).must_measure)
    checks = [c for c in result.get("checks") or [] if isinstance(c, dict)]
    required = [c for c in checks if PROBE_OF.get(str(c.get("id")), c.get("id")) in want]
    failing = {c.get("id") for c in required if c.get("status") in ("fail", "error")}
    out = []
    for c in required:
        d: dict = c["data"] if isinstance(c.get("data"), dict) else {}
        m: dict = c["measured"] if isinstance(c.get("measured"), dict) else {}
        if c.get("status") != "skip" or d.get("kind") in ABSENT_KINDS or m.get("status") in ABSENT_STATUS:
            continue
        harness = bool(d.get("could_not_measure") or d.get("harness_error"))
        explained = not harness or (d.get("kind") == "error" and bool(failing - {c.get("id")}))
        out.append({"id": str(c.get("id")), "why": str(c.get("detail") or d.get("could_not_measure") or "skipped"),
                    "explained": explained, "location": c.get("location") if isinstance(c.get("location"), dict)
                    else None})
    return out
