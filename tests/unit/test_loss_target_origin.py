"""A loss computed inside forward() from a `targets` parameter (nanoGPT's forward(idx, targets)) is followed to
the argument train() passed and the statement that made it: the minGPT-style twin whose labels are not shifted
was located at the cross_entropy inside forward (where it shows), now at `X, Y = ...` in train (where it is made)."""
from __future__ import annotations

from pathlib import Path

from harness.child.loader import load, read_source
from harness.child.probes import locate
from harness.child.probes.base import Context

ROOT = Path(__file__).resolve().parents[2]
TWIN = ROOT / "tests" / "corpus" / "reversal" / "bugs" / "mingpt_targets_not_shifted.py"


def _line(text: str, code: str) -> int:
    return next(i for i, s in enumerate(text.splitlines(), 1) if s.strip().startswith(code))


def test_a_target_parameter_is_followed_to_its_caller():
    text = TWIN.read_text()
    src = read_source(str(TWIN), TWIN.read_bytes())
    ctx = Context(load(src), src, "reversal", seed=0)
    loss = _line(text, "loss = F.cross_entropy(logits.view(-1")
    caller = _line(text, "logits, loss = model(src, X, Y)")
    made = _line(text, "X, Y = tgt[:, :-1], tgt[:, :-1]")
    assert locate.loss_target_lines(ctx, loss, (caller,)) == (loss, made)
    # without the caller's line, the parameter has no definition in forward(): the loss line stands
    assert locate.loss_target_lines(ctx, loss, ()) == (loss, None)
