"""The child's time budgets stretch by how much slower than nominal this machine is right now."""
from __future__ import annotations

import time

NOMINAL_STEP_S = 0.012  # one forward+backward of the reference at batch 16, one thread, idle 2-core machine


def slowdown() -> float:
    """How much slower than nominal this machine is right now (time budgets stretch by this)."""
    import torch

    from reference_model import reversal as ref
    state = torch.random.get_rng_state()
    torch.manual_seed(0)
    m = ref.MiniTransformer()
    src, tgt = ref.make_batch(16)
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        logits, _ = m(src, tgt[:, :-1])
        logits.sum().backward()
        best = min(best, time.perf_counter() - t)
    torch.random.set_rng_state(state)
    return max(1.0, best / NOMINAL_STEP_S)
