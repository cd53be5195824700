"""python build_manifest.py: measure every corpus entry against the oracle and write manifest.json.

Reads entries.json (the hand-written metadata: path, form, kind, split, style, and for bugs
component, cause, category, lines, description). For every correct and bug entry it runs all
adapter cases (lmcorpus.cases) and records, per case that differs from the oracle beyond
tolerance, the max abs difference (or the error) in `measured_cases`; `affects` is the list
of components that differ; `measured_diff` the largest finite difference on the entry's own
component (inf/nan/error spelled out as strings). Exits 1 when a bug leaves its own
component unchanged or a correct entry differs anywhere. Special entries are not run here
(one trains at import time).
"""
import json
import math
import sys
from pathlib import Path

import torch

HERE = Path(__file__).parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import lmcorpus  # noqa: E402

ORDER = ["linear", "embedding", "silu", "swiglu", "rmsnorm", "softmax", "sdpa", "rope", "mha",
         "mha_rope", "block", "lm", "cross_entropy", "adamw", "lr_schedule", "gradient_clipping", "get_batch"]


def _num(x):
    return x if math.isfinite(x) else str(x)


def measure(path, ref):
    with lmcorpus.loaded(ROOT / path) as ad:
        out = lmcorpus.run_all(ad)
    cases = {}
    for case, r in ref.items():
        d = lmcorpus.diff(out[case], r)
        if d is None:
            cases[case] = out[case]
        elif not d <= lmcorpus.tol(case, r):  # also catches nan
            cases[case] = _num(d)
    return cases


def main():
    torch.set_num_threads(1)
    entries = json.loads((HERE / "entries.json").read_text())
    with lmcorpus.loaded(HERE / "oracle.py") as ad:
        ref = lmcorpus.run_all(ad)
    failures = []
    for e in entries:
        if e["kind"] == "special":
            continue
        cases = measure(e["path"], ref)
        comps = {lmcorpus.COMPONENT[c] for c in cases}
        if e["kind"] == "correct":
            if cases:
                failures.append(f"{e['path']}: correct entry differs: {cases}")
            continue
        e["affects"] = [c for c in ORDER if c in comps]
        e["measured_cases"] = cases
        own = [v for c, v in cases.items() if lmcorpus.COMPONENT[c] == e["component"]]
        if not own:
            failures.append(f"{e['path']}: own component {e['component']} unchanged (affects {e['affects']})")
            e["measured_diff"] = None
            continue
        nums = [v for v in own if isinstance(v, float)]
        e["measured_diff"] = max(nums) if nums else own[0]
        print(f"{e['path']:45s} {e['component']:18s} {str(e['measured_diff'])[:40]:40s} {e['affects']}")
    (ROOT / "manifest.json").write_text(json.dumps(entries, indent=1) + "\n")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
