"""What measuring every stage of a failing lm component costs, against stopping at the stage that decides.

    python bench/lm_measure_cost.py            # every lm mutant's own component (and the block for model parts)

The child (harness/child/probes/lm/diag/diagnose.py measure_component) measures all stages of a failing component so that
the parent decides (harness/causes/lm_decide.py); the cascade it replaced stopped at the first stage that named
a cause. For each case this prints the seconds of all stages and of the stages up to the deciding one (what the
old cascade ran), in process, one thread, after one warm-up pass (the mutant modules are built once per process).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from harness.causes import lm_decide  # noqa: E402
from harness.child.probes.lm.diag.diagnose import measure_component  # noqa: E402
from harness.child.probes.lm.diag.fingerprint import variant  # noqa: E402
from harness.child.probes.lm.diag.inputs import ADAPTER  # noqa: E402
from mutants.lm_registry import LM_MUTANTS  # noqa: E402

ORDER = ("compare",) + lm_decide.STAGES
MODEL_PARTS = ("rmsnorm", "swiglu", "mha_rope", "rope", "silu")


def deciding_stage(m: dict, r: dict) -> str:
    """The stage whose measurement the decision read last (the old cascade stopped there)."""
    if r.get("interface"):
        stages = [f["stage"] for f in m.get("interface") or ()]
        return next(s for s in lm_decide.INTERFACE_STAGES + ("swapped",) if s in stages)
    return "fingerprint" if r.get("mutant") else "properties"


def cases():
    for mut in LM_MUTANTS:
        yield mut, mut.component
        if mut.component in MODEL_PARTS:
            yield mut, "block"


def main() -> int:
    torch.set_num_threads(1)
    for mut, comp in cases():                   # warm-up: build every mutant module once
        measure_component(comp, getattr(variant(mut.id), ADAPTER[comp]))
    total_all = total_cascade = 0.0
    rows = 0
    for mut, comp in cases():
        times: dict = {}
        t = time.perf_counter()
        m = measure_component(comp, getattr(variant(mut.id), ADAPTER[comp]), times)
        wall = time.perf_counter() - t
        if m["status"] != "fail":
            continue
        r = lm_decide.decide(lm_decide.validate(m))
        stop = deciding_stage(m, r)
        cascade = sum(times.get(s, 0.0) for s in ORDER[:ORDER.index(stop) + 1])
        total_all += wall
        total_cascade += cascade
        rows += 1
        print(f"{mut.id:45s} {comp:18s} {r['cause'] or '-':32s} decided at {stop:12s} all {wall:6.3f} s, "
              f"cascade {cascade:6.3f} s")
    print(f"\n{rows} failing components: all stages {total_all:.2f} s, up to the deciding stage {total_cascade:.2f} s "
          f"(+{total_all - total_cascade:.2f} s, {total_all / max(total_cascade, 1e-9):.2f}x); "
          f"mean +{(total_all - total_cascade) / max(rows, 1):.3f} s per failing component")
    return 0


if __name__ == "__main__":
    sys.exit(main())
