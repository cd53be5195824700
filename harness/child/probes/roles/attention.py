"""The attention role: rows are distributions over the keys, the mask blocks exactly what its convention says,
causality, batch independence, permutation equivariance, dropout only in training and on the weights, the value
projection fed the value input, the 1/sqrt(head_dim) scale and the heads' layout (against the reference given the
student's weights). Each check says what it measured and, failing, the mechanism and the student's line."""
from __future__ import annotations

import torch

from . import bounds, observe
from .support import (StudentFailure, build, calls, diff, discarded, guarded, lines_reading, make, method, params,
                      randn, run, twin)


def sizes(rctx):
    s = rctx.binding.shapes
    return s.get("N", 2), s.get("S", 4), s.get("T", 6), s.get("E", 8), s.get("H", 2)


def forward(rctx, m, q, k, v, mask=None):
    given = {"query": q, "key": k, "value": v, "mask": mask}
    args = [given.get(r) for r in rctx.binding.call or ("query", "key", "value", "mask")]
    while args and args[-1] is None:
        args.pop()
    return run(rctx, f"{rctx.binding.component}.forward", m, *args)


def kinds(rctx) -> tuple[str, ...]:
    """The mask dtypes the binding's convention allows ("float", "bool")."""
    mk = rctx.binding.mask
    if mk is None:
        return ()
    if mk.blocks in ("true", "false"):
        return ("bool",)
    if mk.blocks == "-inf":
        return ("float",)
    return ("bool", "float") if mk.dtype == "any" else (mk.dtype,)    # bool first: what the courses' checks pass


def encode(rctx, allowed: torch.Tensor, kind: str) -> torch.Tensor:
    """`allowed` (query x key, True = attend) written in the binding's convention."""
    blocks = rctx.binding.mask.blocks
    if kind == "bool":
        return (~allowed if blocks == "true" else allowed).to(rctx.device)
    if blocks == "-inf":
        return torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf")).to(rctx.device)
    return allowed.float().to(rctx.device)


def moved_by_key(rctx, m, q, kv, mask, self_attention: bool):
    """How far each query's output moves when one key/value position is perturbed: (S, T), and the base output."""
    base = forward(rctx, m, kv if self_attention else q, kv, kv, mask)
    n, t = kv.shape[0], kv.shape[1]
    moved = torch.zeros(base.shape[1], t, dtype=torch.float64)
    for j in range(t):
        kv2 = kv.clone()
        kv2[:, j] += bounds.PERTURB * randn(rctx, n, kv.shape[-1], offset=100 + j)
        out = forward(rctx, m, kv2 if self_attention else q, kv2, kv2, mask)
        moved[:, j] = (out - base).abs().double().amax(dim=(0, 2)).cpu()
    return base, moved


def mask_site(rctx) -> tuple[int | None, dict]:
    """The student's line a broken mask is fixed at, and what the syntax says about it."""
    fwd = method(rctx, "forward")
    mask_param = (params(fwd) + [None] * 4)[3]
    lost = discarded(fwd, "masked_fill")
    if lost:
        return lost, {"static": "result-discarded"}
    fills = calls(fwd, "masked_fill", "masked_fill_", "where")
    if fills:
        return fills[0].lineno, {}
    reads = lines_reading(fwd, mask_param) if mask_param else []
    if reads:
        return reads[-1], {}
    soft = calls(fwd, "softmax")
    return (soft[0].lineno if soft else (fwd.lineno if fwd else None)), {"static": "no-mask-step"}


def mask_probe(pid: str, kind: str | None, causal: bool):
    measured = guarded(pid)(_mask_probe(pid, kind, causal))

    def probe(rctx):
        """A float mask that raises where the bool mask works is what the signature merely allows: a robustness
        note (a skip that says so), never a problem (the courses' own checks pass bool masks)."""
        out = measured(rctx)
        if kind == "float" and "bool" in kinds(rctx) and out and out[0].get("status") == "error":
            return [make(rctx, pid, "skip", None, "", "robustness note, not a problem: a float mask raises here "
                         f"({out[0].get('detail')}); the course's checks pass bool masks",
                         {"robustness": True}, (out[0].get("location") or {}).get("line"))]
        return out
    return probe


def _mask_probe(pid: str, kind: str | None, causal: bool):
    def probe(rctx):
        allowed_kinds = kinds(rctx)
        if (kind or (allowed_kinds[:1] or ["none"])[0]) not in allowed_kinds:
            return [make(rctx, pid, "skip", detail=f"the declared mask convention takes no {kind or ''} mask")]
        kind_ = kind or allowed_kinds[0]
        n, s, t, e, _ = sizes(rctx)
        m = build(rctx)
        if causal:
            allowed = torch.tril(torch.ones(s, s, dtype=torch.bool))
            q = kv = randn(rctx, n, s, e, offset=1)
        else:
            allowed = some_allowed(rctx, s, t)
            q, kv = randn(rctx, n, s, e, offset=1), randn(rctx, n, t, e, offset=2)
        base, moved = moved_by_key(rctx, m, q, kv, encode(rctx, allowed, kind_), causal)
        blocked = ~allowed
        leaks = int((moved[blocked] > bounds.SAME).sum())
        missed = int((moved[allowed] < bounds.MOVED).sum())
        nan = bool(torch.isnan(base).any())
        expected = f"0 blocked (query, key) pairs that move the output and 0 allowed ones that do not ({kind_} mask)"
        if not nan and leaks == 0 and missed == 0:
            return [make(rctx, pid, "pass", 0, expected)]
        if nan:
            mech = "nan"
            text = "the output holds NaN under the mask: a blocked score filled with +inf or a row left no key"
        elif leaks == int(blocked.sum()) and missed == 0:
            mech, text = "ignored", "every blocked key moves its query's output as much as an allowed one"
        elif leaks == int(blocked.sum()) and missed == int(allowed.sum()):
            mech, text = "inverted", "the output depends on the blocked keys only: the mask's convention is inverted"
        elif causal and leaks and torch.equal(moved > bounds.SAME, torch.triu(torch.ones(s, s, dtype=torch.bool))):
            mech, text = "transposed", "each query sees itself and the later keys: the triangle is transposed"
        else:
            mech, text = "partial", f"{leaks} blocked pairs leak and {missed} allowed pairs are cut"
        line, static = mask_site(rctx)
        mechanism = {"kind": mech, "text": text, **static}
        return [make(rctx, pid, "fail", leaks + missed if not nan else "nan", expected, text,
                     {"mechanism": mechanism, "leaks": leaks, "missed": missed, "mask": kind_}, line)]
    return probe


def some_allowed(rctx, s: int, t: int) -> torch.Tensor:
    """A (query, key) pattern where every query attends somewhere and blocks something."""
    g = torch.Generator().manual_seed(rctx.seed + 17)
    allowed = torch.rand(s, t, generator=g) < 0.5
    allowed[torch.arange(s), torch.arange(s) % t] = True
    allowed[torch.arange(s), (torch.arange(s) + 1) % t] = False
    return allowed


RESHAPES = ("unsqueeze", "view", "reshape", "expand", "repeat", "expand_as", "broadcast_to")


def mask_reshape_line(rctx) -> int | None:
    """The forward's statement that reshapes the mask: indexes it with None, or unsqueezes/views/expands it."""
    import ast
    fwd = method(rctx, "forward")
    name = (params(fwd) + [None] * 4)[3]
    if fwd is None or name is None:
        return None
    for node in sorted((n for n in ast.walk(fwd) if isinstance(n, ast.stmt)), key=lambda n: n.lineno):
        if isinstance(node, (ast.If, ast.For, ast.While, ast.With, ast.FunctionDef)):
            continue
        for x in ast.walk(node):
            on_mask = isinstance(x, (ast.Subscript, ast.Attribute)) and isinstance(x.value, ast.Name) and \
                x.value.id == name
            if on_mask and isinstance(x, ast.Subscript) and any(isinstance(e, ast.Constant) and e.value is None
                                                                 for e in ast.walk(x.slice)):
                return node.lineno
            if on_mask and isinstance(x, ast.Attribute) and x.attr in RESHAPES:
                return node.lineno
    return None


@guarded("mask-batched")
def mask_batched(rctx):
    """A mask with leading batch axes ((1, S, T), (N, S, T)) behaves as the 2-D one: a failure is a problem where
    the pack's Mask declares such masks, else a robustness note (the course passes (S, T))."""
    if rctx.binding.mask is None:
        return [make(rctx, "mask-batched", "skip", detail="the binding declares no mask")]
    n, s, t, e, _ = sizes(rctx)
    m = build(rctx)
    mask = encode(rctx, some_allowed(rctx, s, t), kinds(rctx)[0])
    q, kv = randn(rctx, n, s, e, offset=1), randn(rctx, n, t, e, offset=2)
    base = forward(rctx, m, q, kv, kv, mask)
    expected = "the output under a (1, S, T) and an (N, S, T) copy of the mask equals the output under the (S, T) one"
    problems, line = [], None
    for label, batched in (("(1, S, T)", mask[None]), ("(N, S, T)", mask[None].repeat(n, 1, 1))):
        try:
            out = forward(rctx, m, q, kv, kv, batched)
        except StudentFailure as f:
            problems.append(f"{label}: raises {f}")
            line = line or f.line
            continue
        d = diff(out, base)
        if d > bounds.SAME:
            problems.append(f"{label}: the output differs by {d:.3g}" if d == d and d != float("inf") else
                            f"{label}: the output's shape is {list(out.shape)}")
    if not problems:
        return [make(rctx, "mask-batched", "pass", 0, expected)]
    line = mask_reshape_line(rctx) or line or mask_site(rctx)[0]
    text = "a mask with leading batch axes is not applied as the 2-D one: " + "; ".join(problems)
    mech = {"kind": "batch-axes", "text": text}
    if rctx.binding.mask.shape != "TxS":
        return [make(rctx, "mask-batched", "fail", len(problems), expected, text, {"mechanism": mech}, line)]
    return [make(rctx, "mask-batched", "skip", len(problems), expected, "robustness note, not a problem: the "
                 f"course's mask is (S, T); {text}", {"robustness": True, "mechanism": mech}, line)]


@guarded("rows")
def rows(rctx):
    n, s, t, e, _ = sizes(rctx)
    m = build(rctx)
    q, kv = randn(rctx, n, s, e, offset=1), randn(rctx, n, t, e, offset=2)
    seen = [(line, w) for line, w in observe.softmaxes(m, lambda: forward(rctx, m, q, kv, kv)) if
            w.dim() >= 2 and tuple(w.shape[-2:]) in ((s, t), (t, s))]
    if not seen:
        return [make(rctx, "rows", "skip", detail="no softmax over a (query, key) matrix was seen")]
    line, w = seen[-1]
    expected = f"every row over the {t} keys sums to 1 (within {bounds.ROW_SUM})"
    err = float((w.sum(-1) - 1).abs().max()) if w.shape[-1] == t else float("inf")
    if err <= bounds.ROW_SUM:
        return [make(rctx, "rows", "pass", round(err, 6), expected)]
    over_queries = w.shape[-2] == s and float((w.sum(-2) - 1).abs().max()) <= bounds.ROW_SUM
    mech = {"kind": "over-queries" if over_queries else "not-distributions",
            "text": "the softmax normalises over the queries, not the keys" if over_queries else
            "the attention rows do not sum to 1"}
    return [make(rctx, "rows", "fail", round(err, 4) if err != float("inf") else "shape", expected, mech["text"],
                 {"mechanism": mech}, line)]


@guarded("batch")
def batch(rctx):
    n, s, t, e, _ = sizes(rctx)
    m = build(rctx)
    q, kv = randn(rctx, max(n, 2), s, e, offset=1), randn(rctx, max(n, 2), t, e, offset=2)
    base = forward(rctx, m, q, kv, kv)
    q2, kv2 = q.clone(), kv.clone()
    q2[1] += bounds.PERTURB
    kv2[1] += bounds.PERTURB
    d = diff(forward(rctx, m, q2, kv2, kv2)[0], base[0])
    fwd = method(rctx, "forward")
    st = "pass" if d <= bounds.SAME else "fail"
    return [make(rctx, "batch", st, d, f"changing example 1 moves example 0 by <= {bounds.SAME}",
                 "" if st == "pass" else "examples of a batch mix (a reshape across the batch axis)",
                 {"mechanism": {"kind": "batch-mixed"}} if st == "fail" else {}, fwd.lineno if fwd and st == "fail"
                 else None)]


@guarded("permutation")
def permutation(rctx):
    n, s, t, e, _ = sizes(rctx)
    m = build(rctx)
    q, kv = randn(rctx, n, s, e, offset=1), randn(rctx, n, t, e, offset=2)
    base = forward(rctx, m, q, kv, kv)
    pk, pq = torch.randperm(t, generator=torch.Generator().manual_seed(rctx.seed + 3)), torch.arange(s).flip(0)
    d_keys = diff(forward(rctx, m, q, kv[:, pk], kv[:, pk]), base)
    d_queries = diff(forward(rctx, m, q[:, pq], kv, kv), base[:, pq])
    d = max(d_keys, d_queries)
    st = "pass" if d <= bounds.SAME else "fail"
    return [make(rctx, "permutation", st, d, f"reordering the keys leaves the output and reordering the queries "
                 f"reorders it (within {bounds.SAME})", "" if st == "pass" else
                 f"keys reordered: {d_keys:.2g}; queries reordered: {d_queries:.2g}",
                 {"keys": d_keys, "queries": d_queries})]


@guarded("eval-determinism")
def eval_determinism(rctx):
    n, s, t, e, _ = sizes(rctx)
    m = build(rctx, dropout=0.5)
    q, kv = randn(rctx, n, s, e, offset=1), randn(rctx, n, t, e, offset=2)
    d = diff(forward(rctx, m, q, kv, kv), forward(rctx, m, q, kv, kv))
    expected = "two passes in eval mode (dropout 0.5) agree exactly"
    if d == 0.0:
        return [make(rctx, "eval-determinism", "pass", 0.0, expected)]
    drops = [x for x in observe.dropouts(m, lambda: forward(rctx, m, q, kv, kv)) if x[0] == "dropout" and x[3]]
    mech = {"kind": "dropout-in-eval", "text": "a dropout call is told it trains while the module is in eval "
            "mode (functional dropout without training=self.training)"} if drops else \
        {"kind": "random", "text": "two passes in eval mode differ"}
    return [make(rctx, "eval-determinism", "fail", d, expected, mech["text"], {"mechanism": mech},
                 drops[0][1] if drops else None)]


@guarded("dropout")
def dropout(rctx):
    n, s, t, e, h = sizes(rctx)
    m = build(rctx, dropout=0.5)
    m.train()
    q, kv = randn(rctx, n, s, e, offset=1), randn(rctx, n, t, e, offset=2)
    drops = observe.dropouts(m, lambda: forward(rctx, m, q, kv, kv))
    expected = f"in training, dropout on the attention weights (a tensor ending in ({s}, {t}))"
    if any(d[0] == "sdpa" for d in drops) or any(d[2][-2:] == (s, t) for d in drops if d[0] == "dropout"):
        return [make(rctx, "dropout", "pass", "weights", expected)]
    fwd = method(rctx, "forward")
    if drops:
        shape = drops[0][2]
        mech = {"kind": "on-output", "text": f"dropout is applied to a tensor of shape {list(shape)}, not to the "
                "attention weights"}
        return [make(rctx, "dropout", "fail", str(list(shape)), expected, mech["text"], {"mechanism": mech},
                     drops[0][1])]
    soft = calls(fwd, "softmax")
    mech = {"kind": "missing", "text": "no dropout is applied in training"}
    return [make(rctx, "dropout", "fail", "none", expected, mech["text"], {"mechanism": mech},
                 soft[-1].lineno if soft else None)]


def value_line(rctx) -> int | None:
    """The statement that projects the key input where the value input belongs."""
    fwd = method(rctx, "forward")
    ps = params(fwd)
    if len(ps) < 3:
        return None
    key = ps[1]
    for c in _all_calls(fwd):
        text = ast_text(c.func)
        if "val" in text.lower() or text.split(".")[-1] in ("v", "W_v", "Wv"):
            if any(key in ast_text(a) for a in c.args):
                return c.lineno
    reads = lines_reading(fwd, key)
    return reads[1] if len(reads) > 1 else (reads[0] if reads else None)


def _all_calls(fn):
    import ast
    return sorted((n for n in ast.walk(fn) if isinstance(n, ast.Call)), key=lambda n: n.lineno) if fn else []


def ast_text(node) -> str:
    import ast
    return ast.unparse(node)


@guarded("inputs")
def inputs(rctx):
    n, s, t, e, _ = sizes(rctx)
    m = build(rctx)
    q, k, v = randn(rctx, n, s, e, offset=1), randn(rctx, n, t, e, offset=2), randn(rctx, n, t, e, offset=3)
    base = forward(rctx, m, q, k, v)
    d_value = diff(forward(rctx, m, q, k, randn(rctx, n, t, e, offset=4)), base)
    d_key = diff(forward(rctx, m, q, randn(rctx, n, t, e, offset=5), v), base)
    expected = f"the output moves with the value input and with the key input (by > {bounds.MOVED})"
    if d_value > bounds.MOVED and d_key > bounds.MOVED:
        return [make(rctx, "inputs", "pass", round(min(d_value, d_key), 4), expected)]
    if d_value <= bounds.MOVED:
        from_key = diff(forward(rctx, m, q, k, k), base) <= bounds.SAME
        mech = {"kind": "value-from-key" if from_key else "value-unused",
                "text": "the output does not depend on the value input: the value projection is fed the key input"
                if from_key else "the output does not depend on the value input"}
        return [make(rctx, "inputs", "fail", d_value, expected, mech["text"], {"mechanism": mech},
                     value_line(rctx))]
    mech = {"kind": "key-unused", "text": "the output does not depend on the key input"}
    return [make(rctx, "inputs", "fail", d_key, expected, mech["text"], {"mechanism": mech})]


def scores_line(rctx) -> int | None:
    """The statement that makes the scores the softmax normalises: the first assignment of the softmax's argument
    that multiplies (q @ k^T, matmul, bmm, einsum)."""
    import ast
    fwd = method(rctx, "forward")
    soft = calls(fwd, "softmax")
    if not soft:
        return None
    arg = soft[-1].args[0] if soft[-1].args else soft[-1].func
    while isinstance(arg, (ast.Attribute, ast.Subscript, ast.Call)):
        arg = arg.func if isinstance(arg, ast.Call) else arg.value
    name = arg.id if isinstance(arg, ast.Name) else None
    made = sorted((n for n in ast.walk(fwd) if isinstance(n, ast.Assign) and n.lineno < soft[-1].lineno and
                   any(isinstance(t, ast.Name) and t.id == name for t in n.targets)), key=lambda n: n.lineno)
    multiplies = [n.lineno for n in made if any(isinstance(x, ast.MatMult) for x in ast.walk(n)) or
                  calls(n, "matmul", "bmm", "einsum")]
    return (multiplies or [n.lineno for n in made] or [None])[0]


def centred_log_spread(w: torch.Tensor) -> float:
    lw = torch.log(w.clamp_min(1e-30)).double()
    return float((lw - lw.mean(-1, keepdim=True)).std(-1).mean())


@guarded("scale")
def scale(rctx):
    n, s, t, e, h = sizes(rctx)
    m = build(rctx)
    ref = twin(rctx, m)
    if ref is None:
        return [make(rctx, "scale", "skip", detail="the parameters' names differ from the reference's")]
    q, kv = randn(rctx, n, s, e, offset=1), randn(rctx, n, t, e, offset=2)
    mine = [(ln, w) for ln, w in observe.softmaxes(m, lambda: forward(rctx, m, q, kv, kv))
            if tuple(w.shape[-2:]) == (s, t)]
    theirs = [w for _, w in observe.softmaxes(ref, lambda: ref(q, kv, kv)) if tuple(w.shape[-2:]) == (s, t)]
    if not mine or not theirs:
        return [make(rctx, "scale", "skip", detail="no softmax over the keys was seen")]
    ratio = centred_log_spread(mine[-1][1]) / max(centred_log_spread(theirs[-1]), 1e-12)
    lo, hi = bounds.SCALE_RATIO
    expected = f"the scores' spread over the reference's (scaled by 1/sqrt({e // h})) in [{lo}, {hi}]"
    if lo <= ratio <= hi:
        return [make(rctx, "scale", "pass", round(ratio, 3), expected)]
    line = scores_line(rctx) or mine[-1][0]
    mech = {"kind": "unscaled" if abs(ratio - (e // h) ** 0.5) < 0.3 else "wrong-scale",
            "text": f"the scores spread {ratio:.2f}x the reference's: "
            + ("not divided by sqrt(head_dim)" if abs(ratio - (e // h) ** 0.5) < 0.3 else "scaled by another factor"),
            "ratio": round(ratio, 3)}
    return [make(rctx, "scale", "fail", round(ratio, 3), expected, mech["text"],
                 {"mechanism": mech, "scale": {"ratio": round(ratio, 3)}}, line)]


@guarded("reference")
def reference(rctx):
    n, s, t, e, h = sizes(rctx)
    m = build(rctx)
    ref = twin(rctx, m)
    if ref is None:
        return [make(rctx, "reference", "skip", detail="the parameters' names differ from the reference's")]
    q, kv = randn(rctx, n, s, e, offset=1), randn(rctx, n, t, e, offset=2)
    mine = forward(rctx, m, q, kv, kv)
    d = diff(mine, ref(q, kv, kv))
    expected = f"the reference's output given the student's weights (within {bounds.SAME})"
    if d <= bounds.SAME:
        return [make(rctx, "reference", "pass", d, expected)]
    merged = {}
    hook = ref.proj.register_forward_pre_hook(lambda mod, a: merged.setdefault("x", a[0]))
    ref(q, kv, kv)
    hook.remove()
    heads = merged["x"].view(n, s, h, e // h).transpose(1, 2)          # (n, h, s, hd), as the reference made them
    wrong = ref.proj(heads.reshape(n, s, e))                          # merged without moving the heads back
    fwd = method(rctx, "forward")
    shaping = calls(fwd, "reshape", "view")
    if diff(mine, wrong) <= bounds.SAME:
        mech = {"kind": "heads-merged-wrong", "text": "the heads are merged by a reshape without moving the head "
                "axis back next to the width: each output row mixes the heads' rows"}
        return [make(rctx, "reference", "fail", d, expected, mech["text"], {"mechanism": mech},
                     shaping[-1].lineno if shaping else None)]
    return [make(rctx, "reference", "fail", d, expected, "the output differs from the reference's",
                 {"mechanism": {"kind": "differs"}})]


PROBES_SPEC = (
    ("rows", rows, "quick"), ("mask-float", mask_probe("mask-float", "float", False), "quick"),
    ("mask-bool", mask_probe("mask-bool", "bool", False), "quick"),
    ("causal", mask_probe("causal", None, True), "quick"), ("mask-batched", mask_batched, "quick"),
    ("batch", batch, "quick"),
    ("permutation", permutation, "quick"), ("eval-determinism", eval_determinism, "quick"),
    ("dropout", dropout, "quick"), ("inputs", inputs, "quick"), ("scale", scale, "quick"),
    ("reference", reference, "quick"),
)
