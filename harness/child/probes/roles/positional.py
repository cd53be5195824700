"""The positional role: the table against the formula the binding declares, added to the input (neither the input
nor the table dropped), the caller's tensor left unchanged, the input's dtype kept, dropout only in training."""
from __future__ import annotations

import torch

from . import bounds
from .support import DEFAULT, build, calls, diff, discarded, guarded, lines_reading, make, method, params, randn, run


def declared(formula: str, s: int, d: int) -> torch.Tensor:
    """The declared table (S, D) in float64. "sin-even-cos-odd": column 2k holds sin(i * w_k) and column 2k+1
    cos(i * w_k), w_k = 10000^(-2k/D) (the frequency of the pair's even column)."""
    if formula not in ("sin-even-cos-odd", ""):
        raise ValueError(f"unknown positional formula {formula!r}")
    i = torch.arange(s, dtype=torch.float64)[:, None]
    w = torch.pow(torch.tensor(10000.0, dtype=torch.float64), -torch.arange(0, d, 2, dtype=torch.float64) / d)
    table = torch.zeros(s, d, dtype=torch.float64)
    table[:, 0::2] = torch.sin(i * w)
    table[:, 1::2] = torch.cos(i * w[: d // 2])
    return table


def alternatives(s: int, d: int) -> dict:
    """Tables students write instead, by the mechanism's name."""
    i = torch.arange(s, dtype=torch.float64)[:, None]
    j = torch.arange(d, dtype=torch.float64)
    own = torch.pow(torch.tensor(10000.0, dtype=torch.float64), -j / d)        # each column its own exponent j/D
    right = declared("", s, d)
    odd_own = right.clone()
    odd_own[:, 1::2] = torch.cos(i * own[1::2])
    swapped = right.clone()
    swapped[:, 0::2], swapped[:, 1::2] = right[:, 1::2], right[:, 0::2]
    return {"odd-exponent": odd_own, "sin-cos-swapped": swapped}


def sizes(rctx):
    s = rctx.binding.shapes
    return s.get("N", 1), s.get("S", 3), s.get("D", 6)


def encode(rctx, m, x):
    return run(rctx, f"{rctx.binding.component}.forward", m, x)


def table_of(rctx, s: int, d: int, **init) -> torch.Tensor:
    m = build(rctx, embed_dim=d, dropout=0.0, **init)
    return encode(rctx, m, torch.zeros(1, s, d, device=rctx.device))[0].detach().double().cpu()


def init_line(rctx, word: str) -> int | None:
    init = method(rctx, "__init__")
    hits = [c.lineno for c in calls(init, word)]
    return hits[0] if hits else (init.lineno if init else None)


MODULES = {"torch", "math", "np", "numpy", "self", "F", "nn"}


def _names(node) -> set[str]:
    import ast
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} - MODULES


def _raises(node) -> bool:
    import ast
    return bool(calls(node, "pow", "exp", "power")) or any(isinstance(x, ast.Pow) for x in ast.walk(node))


def _targets(st) -> set[str]:
    """The names a statement writes: `a = ...`, `a[...] = ...`, `a += ...` all write a."""
    import ast
    ts = st.targets if isinstance(st, ast.Assign) else [st.target]
    out = set()
    for t in ts:
        for n in ast.walk(t):
            while isinstance(n, (ast.Subscript, ast.Attribute, ast.Starred)):
                n = n.value
            if isinstance(n, ast.Name):
                out.add(n.id)
    return out - MODULES


def origin_line(rctx, word: str) -> int | None:
    """The statement that makes the frequency the first `word` (sin/cos) call of __init__ uses: walking back from
    the call through the statements that write what it reads (a backward slice: `a = ...`, `a[...] = ...`,
    `a += ...`), the latest one that raises to a power (pow, exp, **); else None."""
    import ast
    init = method(rctx, "__init__")
    hits = calls(init, word)
    if not hits:
        return None
    call = hits[0]
    if _raises(call):
        return call.lineno
    wanted = _names(call)
    writes = sorted((n for n in ast.walk(init) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and
                     n.value is not None and n.lineno < call.lineno), key=lambda n: -n.lineno)
    for st in writes:                   # latest first: what the call reads, then what that was made from
        if not _targets(st) & wanted:
            continue
        if _raises(st.value):
            return st.lineno
        wanted |= _names(st.value)
    return None


@guarded("formula")
def formula(rctx):
    for s, d, init in ((50, 16, {"max_len": 60}), (300, 32, {"max_len": DEFAULT})):
        got = table_of(rctx, s, d, **init)
        if diff(got, torch.zeros_like(got)) == 0.0:
            return [make(rctx, "formula", "skip", detail="the output of a zero input is zero: the table is not "
                         "added, so it cannot be read")]
        want = declared(rctx.binding.formula, s, d)
        err = diff(got, want)
        if err > bounds.FORMULA:
            break
    expected = f"the declared table ({rctx.binding.formula}) within {bounds.FORMULA}, S={s}, D={d}"
    if err <= bounds.FORMULA:
        return [make(rctx, "formula", "pass", round(err, 7), expected)]
    if got.shape != want.shape:
        return [make(rctx, "formula", "fail", "shape", expected, f"table of shape {list(got.shape)}",
                     {"mechanism": {"kind": "shape"}}, init_line(rctx, "zeros"))]
    bad = (got - want).abs() > bounds.FORMULA
    cols = sorted({int(c) for c in bad.nonzero()[:, 1]})
    kind = next((k for k, t in alternatives(s, d).items() if diff(got, t) <= bounds.FORMULA), None)
    if kind is None:
        kind = "odd-columns" if all(c % 2 for c in cols) else "even-columns" if not any(c % 2 for c in cols) \
            else "table"
    word = "cos" if kind in ("odd-exponent", "odd-columns") else "sin" if kind == "even-columns" else "pow"
    line = origin_line(rctx, word) or init_line(rctx, word) or init_line(rctx, "exp")
    text = {"odd-exponent": "the cosine columns use their own index j in the exponent, not the pair's j - 1",
            "sin-cos-swapped": "sine and cosine columns are swapped"}.get(kind, f"columns {cols[:6]} differ")
    return [make(rctx, "formula", "fail", round(float((got - want).abs().max()), 4), expected,
                 f"{text} (first wrong column {cols[0]})", {"mechanism": {"kind": kind, "text": text},
                                                            "columns": cols[:16]}, line)]


def forward_line(rctx, prefer: tuple[str, ...] = ()) -> int | None:
    fwd = method(rctx, "forward")
    if fwd is None:
        return None
    for word in prefer:
        hit = calls(fwd, word)
        if hit:
            return hit[0].lineno
    x = (params(fwd) + ["x"])[0]
    reads = lines_reading(fwd, x)
    return reads[-1] if reads else fwd.lineno


@guarded("added")
def added(rctx):
    n, s, d = sizes(rctx)
    m = build(rctx, dropout=0.0)
    x = randn(rctx, n, s, d, offset=1)
    got = encode(rctx, m, x.clone()).detach()
    table = encode(rctx, m, torch.zeros_like(x)).detach()
    expected = "output = input + table (input and table both kept)"
    err = diff(got, x + table)
    if err <= bounds.SAME and diff(table, torch.zeros_like(table)) > bounds.MOVED:
        return [make(rctx, "added", "pass", err, expected)]
    if diff(got, x) <= bounds.SAME:
        kind, text = "not-added", "the output is the input: the encoding is computed but never added"
    elif diff(got, table) <= bounds.SAME:
        kind, text = "input-dropped", "the output is the table alone: the input is not added"
    else:
        kind, text = "other", "the output is not input + table"
    return [make(rctx, "added", "fail", err, expected, text, {"mechanism": {"kind": kind, "text": text}},
                 forward_line(rctx))]


@guarded("in-place")
def in_place(rctx):
    n, s, d = sizes(rctx)
    m = build(rctx, dropout=0.0)
    x = randn(rctx, n, s, d, offset=1)
    keep = x.clone()
    encode(rctx, m, x)
    changed = diff(x, keep)
    expected = "the caller's tensor unchanged"
    if changed == 0.0:
        return [make(rctx, "in-place", "pass", 0.0, expected)]
    fwd = method(rctx, "forward")
    line = None
    if fwd is not None:
        import ast
        x_name = (params(fwd) + ["x"])[0]
        for node in ast.walk(fwd):
            if isinstance(node, ast.AugAssign) and ast.unparse(node.target).split("[")[0] == x_name:
                line = node.lineno
        line = line or next((c.lineno for c in calls(fwd, "add_", "copy_") if x_name in ast.unparse(c)), None)
    text = "forward adds the encoding into the caller's tensor in place"
    return [make(rctx, "in-place", "fail", changed, expected, text, {"mechanism": {"kind": "in-place", "text": text}},
                 line or forward_line(rctx))]


@guarded("dtype")
def dtype(rctx):
    n, s, d = sizes(rctx)
    m = build(rctx, dropout=0.0)
    x = randn(rctx, n, s, d, offset=1, dtype=torch.float64)
    got = encode(rctx, m, x)
    expected = "a float64 input gives a float64 output"
    if got.dtype == torch.float64:
        return [make(rctx, "dtype", "pass", str(got.dtype), expected)]
    text = f"the output is {got.dtype}: written into a buffer of another dtype"
    return [make(rctx, "dtype", "fail", str(got.dtype), expected, text, {"mechanism": {"kind": "cast", "text": text}},
                 forward_line(rctx, ("empty", "zeros", "empty_like")))]


@guarded("dropout")
def dropout(rctx):
    n, s, d = sizes(rctx)
    m = build(rctx, dropout=0.5)
    x = randn(rctx, n, s, d, offset=1)
    clean = encode(rctx, build(rctx, dropout=0.0), x.clone()).detach()
    ev = encode(rctx, m, x.clone()).detach()
    m.train()
    tr = encode(rctx, m, x.clone()).detach()
    expected = "eval: input + table exactly; training (p 0.5): some entries zeroed"
    zeroed = int(((tr == 0) & (clean != 0)).sum())
    if diff(ev, clean) <= bounds.SAME and zeroed > 0:
        return [make(rctx, "dropout", "pass", zeroed, expected)]
    fwd = method(rctx, "forward")
    if diff(ev, clean) > bounds.SAME:
        kind, text = "dropout-in-eval", "the output in eval mode differs from input + table: dropout still active"
        line = forward_line(rctx, ("dropout",))
    else:
        lost = discarded(fwd, "dropout")
        kind = "dropout-discarded" if lost else "dropout-missing"
        text = "the dropout's result is discarded" if lost else "no dropout is applied in training"
        line = lost or forward_line(rctx)
    return [make(rctx, "dropout", "fail", zeroed, expected, text, {"mechanism": {"kind": kind, "text": text}}, line)]


PROBES_SPEC = (("formula", formula, "quick"), ("added", added, "quick"), ("in-place", in_place, "quick"),
               ("dtype", dtype, "quick"), ("dropout", dropout, "quick"))

