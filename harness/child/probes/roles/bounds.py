"""The numbers the role probes compare with, in one place (each with where it comes from).

Every comparison is between two runs of the same module in float32 on the same inputs, so a property that holds
exactly leaves differences at rounding (~1e-7 relative); the bounds sit well above that and far below what a bug
makes (a masked key that leaks moves its query's output by ~1e-1 with the probes' perturbation of size 3)."""
from __future__ import annotations

SAME = 1e-5             # max |a - b| for "did not move" (float32 rounding of an 8-wide attention is ~1e-7)
MOVED = 1e-4            # max |a - b| for "moved": an input the output depends on moves it by >= 1e-3 here
ROW_SUM = 1e-4          # |sum of an attention row - 1|
SCALE_RATIO = (0.8, 1.25)   # the student's scores' spread over the reference's with the same weights
FORMULA = 1e-4          # max |table - declared formula| (float32 sin/cos of positions <= 300)
LOSS_AT_INIT = 0.5      # |first-step loss - ln V|: at the course's small init the logits are ~0 (loss ln V +- 0.05)
PERTURB = 3.0           # the size of a perturbation of one position's input
LEAK = 0.01             # a later token's pull on earlier scores over its pull on its own position's: exactly 0 when
                        # masked (-inf or -1e9 fills give weights of exactly 0); a leak is of the same order (~0.3-3)
