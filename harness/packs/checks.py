"""The generic role probes' checks, declared torch-free (the child's harness/child/probes/roles/ measures them):
per role, each probe's id, what it measures and its threshold. A pack's check ids are f"{component}.{probe}" for
each of its bindings; `declared(pack)` gives them as harness/checks.py declares every check."""
from __future__ import annotations

from .api import Pack

SOURCE = "probes/roles/bounds.py: float32 rounding of two runs of the same module"

# role -> ((probe id, what it measures, threshold), ...)
ROLE_CHECKS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "attention": (
        ("rows", "the attention weights' rows over the keys sum to 1", "within 1e-4"),
        ("mask-float", "(query, key) pairs where a perturbed key moves the query's output against the float mask's "
                       "convention", "0 blocked pairs move, 0 allowed pairs stay"),
        ("mask-bool", "the same with a bool mask", "0 blocked pairs move, 0 allowed pairs stay"),
        ("causal", "the same with a lower-triangular mask in self-attention", "0 later keys move an earlier query"),
        ("mask-batched", "the output under a (1, S, T) and an (N, S, T) copy of the mask against the (S, T) one "
                         "(a robustness note where the pack's Mask is (S, T))", "within 1e-5"),
        ("batch", "example 0's output when example 1 changes", "moves by <= 1e-5"),
        ("permutation", "keys reordered: output unchanged; queries reordered: output reordered", "within 1e-5"),
        ("eval-determinism", "two eval-mode passes with dropout 0.5", "identical"),
        ("dropout", "what a training pass drops", "the attention weights"),
        ("inputs", "how far the output moves with the value input and with the key input", "> 1e-4 each"),
        ("scale", "the scores' spread over the reference's given the same weights", "0.8 to 1.25"),
        ("reference", "the output against the reference's given the same weights", "within 1e-5"),
    ),
    "positional": (
        ("formula", "max |table - the declared formula| (S 50, D 16; S 300, D 32 at the default max_len)",
         "within 1e-4"),
        ("added", "output against input + table", "within 1e-5, the table not zero"),
        ("in-place", "the caller's tensor after forward", "unchanged"),
        ("dtype", "the output's dtype for a float64 input", "float64"),
        ("dropout", "eval: input + table exactly; training: entries zeroed", "both"),
    ),
    "model": (
        ("loss-at-init", "the first step's cross-entropy", "ln V within 0.5"),
        ("causal", "earlier positions' scores when a later caption token changes; the mask the model passes",
         "< 1% of a later position's change; the lower triangle"),
        ("uses-image", "how far the scores move with other image features", "> 1e-4"),
        ("added-once", "each submodule's input against an additive submodule's output plus its input again",
         "never equal"),
        ("gradients", "parameters the reference trains that get no gradient", "0"),
        ("reference", "the scores against the reference's given the same weights", "within 1e-5"),
    ),
    "layer": (
        ("call", "the layer called with its mask and without it (the mask's default)", "a tensor of x's shape both "
                 "times"),
        ("reference", "the output against the reference's given the same weights, in eval; the submodules' order",
         "within 1e-5"),
        ("mask", "earlier positions' outputs when a later position changes, under the lower-triangular mask",
         "move by <= 1e-5"),
        ("dropout", "two eval passes with dropout 0.5; two training passes", "identical; different"),
    ),
    "sampler": (
        ("sample", "the sampled words' shape, dtype, determinism and the reference's words", "all hold"),
    ),
    "feed-forward": (
        ("shape", "the output's shape against the input's", "equal"),
        ("position-wise", "each token's output row when one token changes (eval)", "its own row moves by > 1e-4, "
                          "no other by > 1e-5"),
        ("nonlinear", "|f(a + b) - f(a) - f(b) + f(0)| (eval)", "> 1e-4 (not affine)"),
        ("dropout", "two eval passes with dropout 0.5; two training passes", "identical; different"),
        ("reference", "the output against the reference's given the same weights, in eval; the first submodule "
                      "that leaves it", "within 1e-5"),
    ),
    "patch-embedding": (
        ("shape", "the output's shape for (N, C, H, W) images", "(N, (H/p)(W/p), E)"),
        ("layout", "the tokens one pixel of each patch k moves", "token k alone (k = row * W/p + column)"),
        ("batch", "example 0's tokens when image 1 changes", "move by <= 1e-5"),
    ),
    "classifier": (
        ("shape", "the logits' shape", "(N, classes)"),
        ("batch", "example 0's logits when image 1 changes", "move by <= 1e-5"),
        ("eval-determinism", "two eval-mode passes with dropout 0.5", "identical"),
        ("attends-all", "the encoder output's tokens when the last patch changes; the masks its submodules are "
                        "handed", "every token moves by > 1e-4 (no mask restricts an encoder)"),
        ("gradients", "parameters the reference trains that get no gradient", "0"),
        ("reference", "the logits against the reference's given the same weights, in eval", "within 1e-5"),
    ),
}


# the replay of the course's own calls (Binding.course), run on a binding that declares them (NO_COURSE_CHECK included:
# the check then says the course runs none) and whose role has probes
COURSE_CHECK = ("course", "the piece called as the course's own checks call it (Binding.course), against the "
                          "reference given its weights: would those checks pass", "each call's relative-error bar")


def checks_of(b) -> tuple[tuple[str, str, str], ...]:
    """A binding's (probe id, measures, threshold): its role's, and the course replay's when it declares calls."""
    own = ROLE_CHECKS.get(b.role, ())
    return own + ((COURSE_CHECK,) if own and b.course is not None else ())


def ids(pack: Pack) -> list[str]:
    return [f"{b.component}.{pid}" for b in pack.bindings for pid, _, _ in checks_of(b)]


def declared(pack: Pack) -> dict:
    """{probe id: ((id, measures, threshold, source, component), ...)} for each bound component's checks."""
    out: dict = {}
    for b in pack.bindings:
        for pid, measures, threshold in checks_of(b):
            cid = f"{b.component}.{pid}"
            out[cid] = ((cid, f"{b.component}: {measures}", threshold, SOURCE, b.component),)
    return out
