"""python compare.py ENTRY [ENTRY ...]: each entry's per-case max abs difference to the oracle."""
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import lmcorpus  # noqa: E402

torch.set_num_threads(1)
with lmcorpus.loaded(Path(__file__).parent / "oracle.py") as ad:
    ref = lmcorpus.run_all(ad)
for entry in sys.argv[1:]:
    with lmcorpus.loaded(entry) as ad:
        out = lmcorpus.run_all(ad)
    print(f"== {entry}")
    for case, r in ref.items():
        assert not isinstance(r, str), (case, r)
        d = lmcorpus.diff(out[case], r)
        flag = "ok " if d is not None and d <= lmcorpus.tol(case, r) else "BAD"
        print(f"  {flag} {case:24s} {d if d is not None else out[case]}")
