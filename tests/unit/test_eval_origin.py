"""Where train()'s model went to eval mode: a helper of the student's own that calls model.eval() and never
switches back is located at that eval() (the blind set's s21: was the logging line in train() that called it);
a contract function that must evaluate (greedy_decode) is located at train()'s call, where model.train() is
missing after it (corpus eval_after_logging_decode, as before)."""
from __future__ import annotations

from pathlib import Path

from harness.child.loader import load, read_source
from harness.child.probes import training
from harness.child.probes.base import Context

ROOT = Path(__file__).resolve().parents[2]


def _ctx(path: Path) -> Context:
    src = read_source(str(path), path.read_bytes())
    return Context(load(src), src, "reversal", seed=0)


def _line(path: Path, code: str) -> int:
    return next(i for i, s in enumerate(path.read_text().splitlines(), 1) if s.strip().startswith(code))


def test_a_helpers_own_eval_is_the_origin():
    path = ROOT / "tests" / "corpus" / "reversal" / "unseen" / "bugs" / "s21_accum.py"
    helper, call = _line(path, "model.eval()"), _line(path, 'print(f"step {step:5d}  loss {total:.4f}  acc')
    assert training._eval_origin(_ctx(path), call, helper) == helper


def test_a_contract_function_that_evaluates_points_at_trains_call():
    path = ROOT / "tests" / "corpus" / "reversal" / "bugs" / "eval_after_logging_decode.py"
    decode_eval, call = _line(path, "model.eval()"), _line(path, "sample, _ = greedy_decode(model")
    assert training._eval_origin(_ctx(path), call, decode_eval) == call
