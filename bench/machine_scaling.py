"""How well this machine runs two processes at once: the ceiling for `--jobs 2` and a 2-worker Dask cluster.

    python bench/machine_scaling.py [--repeat 5]

Two workloads, each timed alone and as two processes started together (fork, one thread each):
`python` (an interpreter loop, like the per-op overhead that dominates a check of a small model) and `torch`
(forward and backward of the reference model at batch 8). Throughput ratio = 2 * alone / slower of the two;
2.0 is perfect scaling. Medians over --repeat rounds, alone and together interleaved. Writes
bench/results/machine_scaling.json. A grading ratio (grade_bench.py --dask 1,2) near these is the machine's
limit, not the grader's.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def python_loop(_=None) -> float:
    t = time.perf_counter()
    s = 0
    for i in range(10_000_000):
        s += i
    return time.perf_counter() - t


def torch_steps(_=None) -> float:
    import torch
    torch.set_num_threads(1)
    sys.path.insert(0, str(ROOT))
    from reference_model import reversal as R
    torch.manual_seed(0)
    model = R.MiniTransformer()
    src, tgt = R.make_batch(8)
    t = time.perf_counter()
    for _ in range(120):
        logits, _ = model(src, tgt[:, :-1])       # (8, T, V)
        logits.sum().backward()
    return time.perf_counter() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    ctx = mp.get_context("fork")
    out = {}
    with ctx.Pool(2) as pool:
        for name, fn in (("python", python_loop), ("torch", torch_steps)):
            pool.map(fn, [0, 1])                         # warm: imports, allocator
            alone, together = [], []
            for _ in range(a.repeat):
                alone.append(pool.apply(fn))
                together.append(max(pool.map(fn, [0, 1], chunksize=1)))
            ratio = 2 * statistics.median(alone) / statistics.median(together)
            out[name] = {"alone_s": round(statistics.median(alone), 3),
                         "together_s": round(statistics.median(together), 3), "throughput_ratio": round(ratio, 2)}
            print(f"{name:7s} alone {out[name]['alone_s']:.3f} s, two at once {out[name]['together_s']:.3f} s: "
                  f"throughput x{ratio:.2f} (perfect: x2.00)")
    path = ROOT / "bench" / "results" / "machine_scaling.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
