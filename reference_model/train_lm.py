"""Train the tiny `lm` checkpoint (reference_model/lm_tiny.pt + lm_tiny.json).

    OMP_NUM_THREADS=1 python -m reference_model.train_lm            # about a minute of one CPU core (65 s here)

Probes run the student's model on trained as well as random weights: trained
weights have structured attention (copying, counting) that random ones lack.
The text is synthetic and made here from SEED, so nothing is downloaded:
a token stream of three kinds of "sentences" over a 64-token vocabulary:
  count   a run of consecutive tokens from a random start        (local, positional)
  copy    4-6 random tokens, SEP, the same tokens again           (needs attention to the past)
  grammar DET NOUN VERB DET NOUN with number agreement            (a little syntax)
Everything used for training is the reference's own code (get_batch,
cross_entropy, AdamW, cosine_lr, clip_gradients).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch

from reference_model.lm import AdamW, TransformerLM, clip_gradients, cosine_lr, cross_entropy, get_batch

SEED = 0
CONFIG = dict(vocab_size=64, context_length=32, d_model=32, num_layers=2, num_heads=4, d_ff=96,
              rope_theta=10000.0)
STEPS, BATCH, MAX_LR, MIN_LR, WARMUP = 4000, 32, 1e-2, 1e-3, 100
HERE = Path(__file__).resolve().parent
CHECKPOINT, SUMMARY = HERE / "lm_tiny.pt", HERE / "lm_tiny.json"

# token ids: 0 = EOS, 1 = SEP, 2..3 determiners (singular, plural), 4..13 singular nouns,
# 14..23 plural nouns, 24..28 singular verbs, 29..33 plural verbs, 34..63 "content" tokens
EOS, SEP = 0, 1


def make_text(n_tokens: int, rng: np.random.Generator) -> np.ndarray:
    out: list[int] = []
    while len(out) < n_tokens:
        kind = rng.integers(3)
        if kind == 0:                                   # count
            start, length = rng.integers(34, 56), rng.integers(4, 9)
            out += list(range(start, min(64, start + length)))
        elif kind == 1:                                 # copy
            chunk = list(rng.integers(34, 64, size=rng.integers(4, 7)))
            out += chunk + [SEP] + chunk
        else:                                           # grammar with agreement
            plural = rng.integers(2)
            noun = (14 if plural else 4) + rng.integers(10)
            verb = (29 if plural else 24) + rng.integers(5)
            plural2 = rng.integers(2)
            noun2 = (14 if plural2 else 4) + rng.integers(10)
            out += [2 + plural, noun, verb, 2 + plural2, noun2]
        out.append(EOS)
    return np.asarray(out[:n_tokens], dtype=np.int64)


@torch.no_grad()
def evaluate(model, data, batches=20) -> float:
    losses = []
    for _ in range(batches):
        x, y = get_batch(data, BATCH, CONFIG["context_length"], "cpu")
        losses.append(float(cross_entropy(model(x), y)))
    return float(np.mean(losses))


@torch.no_grad()
def copy_accuracy(model, rng, n=200) -> float:
    """Greedy next-token accuracy on the second half of copy sentences (needs attention to the past)."""
    hits = total = 0
    for _ in range(n):
        chunk = list(rng.integers(34, 64, size=5))
        ids = torch.tensor([[EOS] + chunk + [SEP] + chunk])         # (1, 12)
        pred = model(ids)[0].argmax(-1)                             # (12,)
        hits += int((pred[6:-1] == ids[0, 7:]).sum())               # after SEP: predict the copy
        total += len(chunk)
    return hits / total


def main() -> None:
    torch.manual_seed(SEED)
    np.random.seed(SEED)                                # get_batch samples with np.random
    rng = np.random.default_rng(SEED)
    train, val = make_text(200_000, rng), make_text(20_000, rng)
    model = TransformerLM(**CONFIG)
    opt = AdamW(model.parameters(), lr=MAX_LR, weight_decay=0.01)
    first = evaluate(model, val)
    started, curve = time.time(), []
    for it in range(STEPS):
        lr = cosine_lr(it, MAX_LR, MIN_LR, WARMUP, STEPS)
        for group in opt.param_groups:
            group["lr"] = lr
        x, y = get_batch(train, BATCH, CONFIG["context_length"], "cpu")
        loss = cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        clip_gradients(model.parameters(), 1.0)
        opt.step()
        if it % 100 == 0 or it == STEPS - 1:
            curve.append([it, round(loss.item(), 4)])
            print(f"step {it:5d}  lr {lr:.4f}  loss {loss.item():.4f}", flush=True)
    last = evaluate(model, val)
    accuracy = copy_accuracy(model, np.random.default_rng(SEED + 1))
    torch.save(model.state_dict(), CHECKPOINT)
    summary = dict(config=CONFIG, seed=SEED, steps=STEPS, batch_size=BATCH, max_lr=MAX_LR, min_lr=MIN_LR,
                   warmup_iters=WARMUP, weight_decay=0.01, max_grad_norm=1.0,
                   val_loss_initial=round(first, 4), val_loss_final=round(last, 4), copy_accuracy=round(accuracy, 4),
                   train_curve=curve, seconds=round(time.time() - started, 1),
                   torch=torch.__version__, text="synthetic: count / copy / grammar, see make_text")
    SUMMARY.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(f"val loss {first:.4f} -> {last:.4f}, copy accuracy {accuracy:.3f}; wrote {CHECKPOINT.name} ({CHECKPOINT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
