"""Ground truth for the corpus, measured without the engine: does each file do what the manifest says?

    python bench/corpus_sanity.py FILE... [--train STEPS]

Loads a corpus file the way the harness does (definitions only), then measures properties every
correct reversal model has: forward shape, causality of the decoder (eval), batch independence, eval
determinism, greedy_decode runs; with --train, the file's own train() for STEPS steps and the eval loss
on fixed batches before and after. Runs the file in THIS process: only for the project's own corpus.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from harness.child.loader import load, read_source  # noqa: E402


def load_file(path):
    raw = Path(path).read_bytes()
    return load(read_source(str(path), raw), module_name="corpus_" + Path(path).stem)


def batch(n, seed):
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(4, 11, (n,), generator=g)
    T = int(lens.max())
    src = torch.full((n, T), 10, dtype=torch.long)
    tgt = torch.full((n, T + 2), 10, dtype=torch.long)
    for i, L in enumerate(lens.tolist()):
        s = torch.randint(0, 10, (L,), generator=g)
        src[i, :L] = s
        tgt[i, 0], tgt[i, 1:L + 1], tgt[i, L + 1] = 11, s.flip(0), 12
    return src, tgt


def logits_of(model, src, tgt_in):
    out = model(src, tgt_in)
    return (out[0] if isinstance(out, (tuple, list)) else out).float()


@torch.no_grad()
def eval_loss(model, seeds=(101, 102, 103)):
    model.eval()
    tot = 0.0
    for s in seeds:
        src, tgt = batch(64, s)
        lg = logits_of(model, src, tgt[:, :-1])
        tot += float(F.cross_entropy(lg.reshape(-1, lg.size(-1)), tgt[:, 1:].reshape(-1), ignore_index=10))
    return tot / len(seeds)


@torch.no_grad()
def properties(model):
    model.eval()
    src, tgt = batch(8, 7)
    tin = tgt[:, :-1].clone()
    a = logits_of(model, src, tin)
    r = {"shape": tuple(a.shape)}
    b = logits_of(model, src, tin)
    r["eval_det"] = float((a - b).abs().max())
    t2 = tin.clone()
    t2[:, -1] = (t2[:, -1] + 3) % 10
    c = logits_of(model, src, t2)
    r["causal_leak"] = float((a[:, :-1] - c[:, :-1]).abs().max())
    s3, t3 = src.clone(), tin.clone()
    g = torch.Generator().manual_seed(99)
    s3[1:] = torch.randint(0, 10, s3[1:].shape, generator=g)         # other samples: new digits, no pad
    t3[1:] = t3[1:].flip(0)
    d = logits_of(model, s3, t3)
    r["batch_dep"] = float((a[0] - d[0]).abs().max())
    s4 = torch.cat([src, torch.full_like(src[:, :1], 10)], dim=1)     # one more PAD column
    e = logits_of(model, s4, tin)
    r["pad_inv"] = float((a - e).abs().max())
    return r


@torch.no_grad()
def greedy_det(mod, model):
    src = batch(3, 5)[0]
    outs = []
    for _ in range(2):
        model.train()                      # as after training: greedy_decode must set eval itself
        ys, _ = mod.greedy_decode(model, src, max_len=8)
        outs.append(ys)
    same = outs[0].shape == outs[1].shape and bool((outs[0] == outs[1]).all())
    return tuple(outs[0].shape), same


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--train", type=int, default=0)
    ap.add_argument("--bs", type=int, default=32)
    a = ap.parse_args()
    torch.set_num_threads(1)
    for f in a.files:
        torch.manual_seed(0)
        try:
            mod = load_file(f)
            model = mod.MiniTransformer()
            p = properties(model)
            line = f"{Path(f).name}: shape {p['shape']} det {p['eval_det']:.1e} leak {p['causal_leak']:.1e} " \
                   f"batchdep {p['batch_dep']:.1e} padinv {p['pad_inv']:.1e}"
            if hasattr(mod, "greedy_decode"):
                shape, same = greedy_det(mod, model)
                line += f" decode {shape} {'det' if same else 'NONDET'}"
            if a.train:
                l0 = eval_loss(model)
                t = time.perf_counter()
                buf = io.StringIO()
                with contextlib.redirect_stdout(buf):
                    mod.train(model, steps=a.train, batch_size=a.bs, lr=1e-3, warmup=min(400, a.train // 5),
                              log_every=10 ** 9)
                l1 = eval_loss(model)
                line += f" | train {a.train}: eval loss {l0:.3f} -> {l1:.3f} ({time.perf_counter() - t:.0f}s)"
            print(line, flush=True)
        except Exception as e:
            print(f"{Path(f).name}: ERROR {type(e).__name__}: {e}", flush=True)


if __name__ == "__main__":
    main()
