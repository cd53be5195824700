"""Which edits each catalogued cause expects at its line, in the order they are tried.

A cause absent here has no usual source fix at one line (a missing scheduler step, a learning rate, an
output layer's init): its diagnosis gets no repair. The generic search (first-divergence repairs for
failures outside the catalogue) tries SEARCH at the line where the property first breaks.
"""
from __future__ import annotations

BY_CAUSE: dict[str, tuple[str, ...]] = {
    "softmax-wrong-dim": ("softmax-axis",),
    # the weights that multiply V normalised again after the masked softmax: that second softmax goes
    "attention-renormalised": ("unwrap",),
    "causal-mask-inverted": ("triangle", "polarity", "diagonal"),
    "causal-mask-off-by-one": ("diagonal", "triangle"),
    "causal-diagonal-masked": ("diagonal", "triangle"),
    "padding-mask-inverted": ("polarity",),
    "causal-mask-missing": ("unused-mask", "unread-mask"),
    "padding-mask-missing": ("unused-mask", "unread-mask", "tile-order"),
    "missing-sqrt-dk": ("scale",),
    "inf-mask-nan": ("finite-minimum",),
    "heads-split-wrong": ("transpose",),
    "view-not-contiguous": ("contiguous", "transpose"),
    "cross-attention-swapped": ("swap",),
    "source-ignored": ("unused-input", "swap"),
    "target-not-shifted": ("shift",),
    "pad-not-ignored": ("ignore-pad",),
    "positional-encoding-trainable": ("buffer",),
    "stale-mask": ("per-step",),
    "positional-max-len": ("unused-input",),
    "encoder-in-decode-loop": ("hoist",),
    "no-gradient-flow": ("detach", "no-grad"),
    "dropout-at-inference": ("flag",),
    "data-digits-missing": ("bound",),
    "learning-rate-too-low": ("learning-rate", "schedule-factor"),
    "data-not-reversed": ("reverse",),
    "positional-encoding-formula": ("bound",),
    "bad-output-init": ("unscale", "drop"),
    "missing-residual": ("residual",),
    "decode-stops-early": ("all-rows",),
    "no-warmup": ("warmup",),
}

# kinds whose edits at one statement are tried from the end of the line back: a shift's target is the later of
# the pair (`inputs, targets = X[:, :-1], X[:, :-1]`: the copy; `model(src, tgt_out)`: the decoder's input, the
# last argument), as the convention writes inputs before targets. Elsewhere the editors' order stands (an
# argument added to a call lands at its closing bracket, so for calls "later" would mean the outer call)
LATER_FIRST = ("shift",)

# first-divergence search: the small generic edits (axis, transpose, polarity, off by one) and the few
# value edits that apply to any attention op
SEARCH = ("softmax-axis", "unwrap", "reduction-axis", "transpose", "polarity", "diagonal", "triangle", "shift", "index",
          "bound", "finite-minimum", "scale", "flag",
          # what a call is given or builds (calls.py)
          "no-copy", "all-parameters", "truthiness", "activation", "distinct", "finite-log", "tile-order",
          "schedule-factor", "time-major",
          # a local mask built and never read, given to the call it was built for (statements.py)
          "unread-mask",
          # which statements run and in what order (order.py): the training loop's mechanisms first, then the
          # plain moves of the statement at the line
          "zero-grad", "scheduler-step", "train-mode", "eval-mode", "renormalise", "trained-only", "order", "drop-statement")
# edits that exist only where their mechanism is in the code (an optimizer's loop without zero_grad, a mask
# applied to a softmax's output, ...): tried before the generic ones, whatever the line; the plain moves last
FIRST = ("zero-grad", "scheduler-step", "train-mode", "eval-mode", "renormalise", "trained-only", "no-copy",
         "all-parameters", "activation", "distinct", "finite-log", "schedule-factor")
LAST = ("order", "drop-statement")
# diagnoses that name no cause: their line is where the property first broke, searched generically
SEARCHED = ("unexplained-failure",)
# never repaired: not a bug of the code's behaviour at a line (the grader, limits, integrity, an interface note)
NEVER = ("grader-fault", "timeout", "memory-limit", "crashed", "contract-deviation", "tampering",
         "forbidden-operation")


def kinds_for(cause_id: str) -> tuple[str, ...] | None:
    """The edit kinds to try for this diagnosis, or None when it has no repair at one line."""
    if cause_id in SEARCHED:
        return SEARCH
    return BY_CAUSE.get(cause_id)
