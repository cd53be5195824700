"""Would the course's own tests see it? A failing `lm` component replayed the way CS336's tests call it.

The course's tests (tests/test_model.py, test_nn_utils.py, test_optimizer.py, test_data.py of the assignment)
call each adapter with keyword arguments on fixed shapes: batch 4, 12 queries, 16 keys, 4 heads of 16 (d_model
64), d_ff 128, vocabulary 10,000, 3 layers, RoPE theta 10,000 at positions 0..11, float32; and compare with
numpy's assert_allclose at their tolerances (rtol 1e-4; atol 1e-6 for most, 1e-5 SwiGLU, 1e-4 the LM with rtol
1e-2, 1e-2 where a test names none). Here the same calls, shapes and tolerances, against the reference on the
same inputs (random weights of the trained ones' scale: the course's own numbers are not ours to copy). A
component that passes here while it fails mtxdiag's own cases is a bug the course's tests cannot see.

`replay(component, fn)` -> {visible, test, case, problem | max_abs and tolerance}: `visible` true when a
course case raises, returns something else than the reference's shape, or differs beyond the tolerance. It
measures; the parent ranks (harness/causes/lm_rank.py). None for a component the course does not test.
"""
from __future__ import annotations

import functools
import math
from collections import Counter

import numpy as np
import torch

from .....readable import cut
from .diagnose import rng_kept
from .fingerprint import reference_fn
from .inputs import block_weights, canonical, lm_weights, raised_by_torch

B, Q, K, H, D, DFF, VOCAB, LAYERS, THETA = 4, 12, 16, 4, 64, 128, 10_000, 3, 10000.0
RTOL, ATOL = 1e-4, 1e-2          # numpy_snapshot's defaults in the course's conftest.py


def _g(k: int) -> torch.Generator:
    return torch.Generator().manual_seed(4700 + k)


def _w(g, d_out, d_in):
    return torch.randn(d_out, d_in, generator=g) / math.sqrt(d_in)


def _x(k, *shape):
    return torch.randn(*shape, generator=_g(k))


def _attn(g):
    return dict(zip(("q_proj_weight", "k_proj_weight", "v_proj_weight", "o_proj_weight"), (_w(g, D, D) for _ in range(4))))


def _sdpa_4d(kwargs):
    return {n: t.reshape(B // 2, 2, *t.shape[1:]) for n, t in kwargs.items()}


def kw(**kwargs):
    """A call with keyword arguments only, as most of the course's tests make it."""
    return (), kwargs


def model_cases(comp: str) -> list[tuple[str, str, object, float, float]]:
    """[(course test, case, call builder, atol, rtol)] for a model component; the builder makes fresh tensors and
    returns (positional arguments, keyword arguments) as the course's test passes them."""
    x = lambda: _x(1, B, Q, D)                                                        # noqa: E731 in_embeddings
    if comp == "linear":
        return [("test_linear", "d_in 64, d_out 128, x[4, 12, 64]",
                 lambda: kw(d_in=D, d_out=DFF, weights=_w(_g(2), DFF, D), in_features=x()), ATOL, RTOL)]
    if comp == "embedding":
        return [("test_embedding", "vocab 10000, d 64, ids[4, 12]", lambda: kw(
            vocab_size=VOCAB, d_model=D, weights=_x(3, VOCAB, D),
            token_ids=torch.randint(0, VOCAB, (B, Q), generator=_g(4))), ATOL, RTOL)]
    if comp == "swiglu":
        def sw():
            g = _g(5)
            return kw(d_model=D, d_ff=DFF, w1_weight=_w(g, DFF, D), w2_weight=_w(g, D, DFF), w3_weight=_w(g, DFF, D),
                        in_features=x())
        return [("test_swiglu", "d_model 64, d_ff 128, x[4, 12, 64]", sw, 1e-5, RTOL)]
    if comp == "sdpa":
        def qkv():
            return kw(Q=_x(6, B, Q, D), K=_x(7, B, K, D), V=_x(8, B, K, D), mask=_x(9, B, Q, K) > 0.5)
        return [("test_scaled_dot_product_attention", "Q[4, 12, 64] K,V[4, 16, 64] mask", qkv, 1e-6, RTOL),
                ("test_4d_scaled_dot_product_attention", "Q[2, 2, 12, 64] K,V[2, 2, 16, 64] mask",
                 lambda: ((), _sdpa_4d(qkv()[1])), 1e-6, RTOL)]
    if comp == "rope":
        return [("test_rope", "x[4, 12, 64] positions 0..11", lambda: ((D,), dict(
            theta=THETA, max_seq_len=Q, in_query_or_key=x(), token_positions=torch.arange(Q))), 1e-6, RTOL)]
    if comp == "mha":
        return [("test_multihead_self_attention", "d_model 64, 4 heads, x[4, 12, 64]", lambda: kw(
            d_model=D, num_heads=H, **_attn(_g(10)), in_features=x()), 1e-6, RTOL)]
    if comp == "mha_rope":
        return [("test_multihead_self_attention_with_rope", "d_model 64, 4 heads, x[4, 12, 64], positions[1, 12]",
                 lambda: kw(d_model=D, num_heads=H, max_seq_len=K, theta=THETA, **_attn(_g(10)), in_features=x(),
                              token_positions=torch.arange(Q)[None]), 1e-6, RTOL)]
    if comp == "block":
        return [("test_transformer_block", "d_model 64, 4 heads, d_ff 128, x[4, 12, 64]", lambda: kw(
            d_model=D, num_heads=H, d_ff=DFF, max_seq_len=K, theta=THETA, weights=block_weights(_g(11), D, DFF),
            in_features=x()), 1e-6, RTOL)]
    if comp == "lm":
        def lm(n=Q):
            return kw(vocab_size=VOCAB, context_length=K, d_model=D, num_layers=LAYERS, num_heads=H, d_ff=DFF,
                        rope_theta=THETA, weights=lm_weights(_g(12), VOCAB, D, DFF, LAYERS),
                        in_indices=torch.randint(0, VOCAB, (B, Q), generator=_g(13))[:, :n])
        return [("test_transformer_lm", "3 layers, ids[4, 12]", lm, 1e-4, 1e-2),
                ("test_transformer_lm_truncated_input", "3 layers, ids[4, 6]", lambda: lm(Q // 2), 1e-4, RTOL)]
    if comp == "rmsnorm":
        return [("test_rmsnorm", "d_model 64, eps 1e-5, x[4, 12, 64]", lambda: kw(
            d_model=D, eps=1e-5, weights=1 + 0.2 * _x(14, D), in_features=x()), 1e-6, RTOL)]
    if comp == "silu":
        return [("test_silu_matches_pytorch", "x[2, 5] in [0, 1)",
                 lambda: ((torch.rand(2, 5, generator=_g(15)),), {}), 1e-6, RTOL)]
    if comp == "softmax":
        s = lambda shift: lambda: ((torch.rand(3, 5, generator=_g(16)) + shift,), {"dim": -1})  # noqa: E731
        return [("test_softmax_matches_pytorch", "x[3, 5], dim -1", s(0.0), 1e-6, RTOL),
                ("test_softmax_matches_pytorch", "x[3, 5] + 100, dim -1", s(100.0), 1e-6, RTOL)]
    if comp == "cross_entropy":
        def ce(scale):
            return lambda: ((torch.rand(8, 5, generator=_g(17)) * scale, torch.randint(0, 5, (8,), generator=_g(18))),
                            {})
        return [("test_cross_entropy", "logits[8, 5] in [0, 1)", ce(1.0), 1e-4, RTOL),
                ("test_cross_entropy", "logits[8, 5] x 1000", ce(1000.0), 1e-4, RTOL)]
    return []


# ----------------------------------------------------------------------------- running and comparing

def _run(fn, call):
    """(list of float64 tensors, None) or (None, what happened instead); call = (args, kwargs)."""
    try:
        out = fn(*call[0], **call[1])
    except NotImplementedError as e:
        return None, ("raises NotImplementedError" if not raised_by_torch(e) else f"raises NotImplementedError: {cut(e, 200)}")
    except Exception as e:                                   # noqa: BLE001 - the student's exception is data
        return None, f"raises {type(e).__name__}: {cut(e, 200)}"
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    if not outs or not all(isinstance(t, torch.Tensor) for t in outs):
        return None, f"returns {type(out).__name__}, not a tensor"
    return [t.detach().double() for t in outs], None


def _compare(mine, ref, atol, rtol) -> dict | None:
    """numpy's assert_allclose: None when it would pass, else {problem} or {max_abs, tolerance}."""
    if len(mine) != len(ref):
        return {"problem": f"returns {len(mine)} tensors, expected {len(ref)}"}
    worst = None
    for a, b in zip(mine, ref):
        if a.shape != b.shape:
            return {"problem": f"returns shape {list(a.shape)}, expected {list(b.shape)}"}
        if not bool(torch.equal(torch.isnan(a), torch.isnan(b))):
            return {"problem": "returns NaN where the reference does not"}
        finite = torch.isfinite(a) & torch.isfinite(b)
        if not bool(torch.equal(a[~finite].nan_to_num(0.0), b[~finite].nan_to_num(0.0))):
            return {"problem": "returns an infinity where the reference does not"}
        err = (a - b).abs()[finite]
        tol = (atol + rtol * b.abs())[finite]
        if err.numel() and bool((err > tol).any()):
            i = int(torch.argmax(err - tol))
            worst = worst or {"max_abs": float(err.max()), "tolerance": float(tol[i])}
    return worst


def _model(comp, student_fn) -> dict:
    ref = reference_fn(comp)
    cases = model_cases(comp)
    for test, case, build, atol, rtol in cases:
        mine, problem = _run(student_fn, build())
        if problem is None:
            with torch.no_grad():
                want, why = _run(ref, build())
            if want is None:
                raise RuntimeError(f"the reference {why} on {case}")
            found = _compare(mine, want, atol, rtol)
        else:
            found = {"problem": problem}
        if found:
            return dict(found, visible=True, test=test, case=case)
    return {"visible": False, "test": cases[-1][0], "case": "; ".join(c[1] for c in cases)}


def _optimize(cls) -> torch.Tensor:
    """test_optimizer.py's _optimize: 1000 AdamW steps on a Linear(3, 2)."""
    torch.manual_seed(42)
    model = torch.nn.Linear(3, 2, bias=False)
    opt = cls(model.parameters(), lr=1e-3, weight_decay=0.01, betas=(0.9, 0.999), eps=1e-8)
    for _ in range(1000):
        opt.zero_grad()
        x = torch.rand(model.in_features)
        y = torch.stack([x[0] + x[1], -x[2]])
        loss = ((y - model(x)) ** 2).sum()
        loss.backward()
        opt.step()
    return model.weight.detach().double()


def _adamw(student_fn) -> dict:
    case = "1000 steps of a Linear(3, 2), lr 1e-3, weight decay 0.01"
    try:
        mine = _optimize(student_fn())
    except Exception as e:                                   # noqa: BLE001 - the student's exception is data
        return {"visible": True, "test": "test_adamw", "case": case, "problem": f"raises {type(e).__name__}: {cut(e, 200)}"}
    found = _compare([mine], [_optimize(reference_fn("adamw")())], 1e-4, RTOL)
    # the test accepts torch's AdamW's numbers too (its decay placement differs in rounding); foreach=False:
    # the same numbers, several times faster on parameters this small
    if found and _compare([mine], [_optimize(functools.partial(torch.optim.AdamW, foreach=False))], 1e-4, 1e-5):
        return dict(found, visible=True, test="test_adamw", case=case)
    return {"visible": False, "test": "test_adamw", "case": case}


def _clipping(student_fn) -> dict:
    """test_gradient_clipping: six 5x5 parameters (the last frozen), gradients of sum(), max norm 1e-2."""
    tensors = [_x(19 + i, 5, 5) for i in range(6)]

    def grads(fn):
        ps = tuple(torch.nn.Parameter(t.clone()) for t in tensors)
        ps[-1].requires_grad_(False)
        torch.cat(ps).sum().backward()
        fn(ps, 1e-2)
        return [p.grad.detach().double().clone() for p in ps if p.grad is not None]
    case = "six parameters [5, 5], the last frozen, max norm 1e-2"
    try:
        mine = grads(student_fn)
    except Exception as e:                                   # noqa: BLE001 - the student's exception is data
        return {"visible": True, "test": "test_gradient_clipping", "case": case,
                "problem": f"raises {type(e).__name__}: {cut(e, 200)}"}
    found = _compare(mine, grads(reference_fn("gradient_clipping")), 1e-6, RTOL)
    return dict(found, visible=True, test="test_gradient_clipping", case=case) if found else \
        {"visible": False, "test": "test_gradient_clipping", "case": case}


def _schedule(student_fn) -> dict:
    case = "it 0..24, max lr 1, min lr 0.1, warmup 7, cycle 21"
    kw = [dict(it=it, max_learning_rate=1, min_learning_rate=0.1, warmup_iters=7, cosine_cycle_iters=21)
          for it in range(25)]
    try:
        mine = torch.tensor([float(student_fn(**k)) for k in kw], dtype=torch.float64)
    except Exception as e:                                   # noqa: BLE001 - the student's exception is data
        return {"visible": True, "test": "test_get_lr_cosine_schedule", "case": case,
                "problem": f"raises {type(e).__name__}: {cut(e, 200)}"}
    want = torch.tensor([float(reference_fn("lr_schedule")(**k)) for k in kw], dtype=torch.float64)
    found = _compare([mine], [want], 0.0, 1e-7)
    return dict(found, visible=True, test="test_get_lr_cosine_schedule", case=case) if found else \
        {"visible": False, "test": "test_get_lr_cosine_schedule", "case": case}


def _get_batch(student_fn) -> dict:
    """test_get_batch: shapes, targets shifted by one, every start drawn within 5 sigma, and cuda:99 refused."""
    data, n, bs, iters = np.arange(0, 100), 7, 32, 1000
    starts: Counter = Counter()
    np.random.seed(4700)
    torch.manual_seed(4700)
    problem, case = None, "arange(100), batch 32, context 7, 1000 draws; device 'cuda:99'"
    try:
        for _ in range(iters):
            x, y = student_fn(dataset=data, batch_size=bs, context_length=n, device="cpu")
            if tuple(x.shape) != (bs, n) or tuple(y.shape) != (bs, n):
                problem = f"returns shapes {list(x.shape)}, {list(y.shape)}, expected [{bs}, {n}]"
                break
            if not bool(((torch.as_tensor(x) + 1) == torch.as_tensor(y)).all()):
                problem = "returns targets that are not the inputs shifted by one"
                break
            starts.update(torch.as_tensor(x)[:, 0].tolist())
    except Exception as e:                                   # noqa: BLE001 - the student's exception is data
        problem = f"raises {type(e).__name__}: {cut(e, 200)}"
    if problem is None:
        m = len(data) - n
        mean, sd = iters * bs / m, math.sqrt(iters * bs * (1 / m) * (1 - 1 / m))
        if max(starts) != m - 1 or min(starts) != 0:
            problem = f"draws starts {min(starts)}..{max(starts)}, expected 0..{m - 1}"
        elif any(not mean - 5 * sd <= c <= mean + 5 * sd for c in starts.values()):
            problem = "draws some starts far more or less often than uniformly"
    if problem is None:
        try:
            student_fn(dataset=data, batch_size=bs, context_length=n, device="cuda:99")
            problem = "does not use the device it is given (no error for 'cuda:99')"
        except (RuntimeError, AssertionError):
            pass
        except Exception as e:                               # noqa: BLE001 - the student's exception is data
            problem = f"raises {type(e).__name__} for 'cuda:99', not the RuntimeError or AssertionError expected"
    return {"visible": True, "test": "test_get_batch", "case": case, "problem": problem} if problem else \
        {"visible": False, "test": "test_get_batch", "case": case}


TRAINING = {"adamw": _adamw, "gradient_clipping": _clipping, "lr_schedule": _schedule, "get_batch": _get_batch}


def replay(component: str, student_fn) -> dict | None:
    """The component as the course's tests call it (see the module docstring); None when they do not test it.
    Raises for a failure of mtxdiag's own (the caller records nothing then)."""
    comp = canonical(component)
    with rng_kept():             # the seeds set here (as the course's tests set them) stay here
        if comp in TRAINING:
            return TRAINING[comp](student_fn)
        return _model(comp, student_fn) if model_cases(comp) else None
