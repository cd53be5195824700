"""Positional encoding: the table against the formula, a buffer not a Parameter, long inputs, and (block)
PE(pos + k) as a fixed rotation of PE(pos)."""
from __future__ import annotations

import torch

from ...readable import cut
from ...checks import bound
from ..intercept import watch
from .base import Skip, StudentError, check, manual_seed, rnd
from .block import output_tensor
from .common import batch, default, eval_model, kwargs_for


def formula(T: int, d: int) -> torch.Tensor:
    pos = torch.arange(T).unsqueeze(1).float()                       # (T, 1)
    i2 = torch.arange(0, d, 2).float()                               # (d/2,)
    ang = pos / (10000.0 ** (i2 / d))                                # (T, d/2)
    pe = torch.zeros(T, d)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(ang), torch.cos(ang)
    return pe


def _table(ctx, T=50, d=64):
    """The student's table: whatever the module adds to a zero input (dropout 0, eval)."""
    if ctx.has("PositionalEncoding"):
        cls = ctx.module.PositionalEncoding
        rec = watch(ctx.source.code_path)
        with rec, ctx.student("PositionalEncoding(64, max_len=64, dropout=0.0)"):
            mod = cls(d, **kwargs_for(cls, max_len=64, dropout=0.0))
        mod.eval()
        tables = []
        for shape in _layouts(ctx, cls, T, d):       # (B, T, D) as the contract, or (T, B, D) internals
            try:
                with torch.no_grad(), ctx.student("PositionalEncoding.forward"):
                    manual_seed(1)
                    tables.append(mod(torch.zeros(*shape, device=ctx.device)).reshape(T, d).cpu())
                    manual_seed(2)
                    twice = mod(torch.zeros(*shape, device=ctx.device)).reshape(T, d).cpu()
                ctx.cache["pe_random"] = ctx.cache.get("pe_random") or not torch.equal(tables[-1], twice)
            except Exception:
                if not tables and shape[0] != 1:
                    raise
        want = formula(T, d)
        return min(tables, key=lambda t: float((t - want).abs().max())), rec, mod
    if ctx.has("positional_encoding"):
        rec = watch(ctx.source.code_path)
        with rec, torch.no_grad(), ctx.student("positional_encoding(seq_len, d_model)"):
            out = ctx.module.positional_encoding(T, d)
        return out.reshape(T, d).cpu(), rec, None
    raise Skip("neither PositionalEncoding nor positional_encoding is defined")


def _layouts(ctx, cls, T, d):
    """The layout the model itself calls its PositionalEncoding in (3 samples of 7 tokens), else both."""
    if not ctx.has("MiniTransformer"):
        return ((1, T, d), (T, 1, d))
    from .common import batch, eval_model
    seen = []
    try:
        model = eval_model(ctx)
        src, tgt = batch(ctx, 3, 7, 7, seed_offset=45)
        hooks = [m.register_forward_pre_hook(lambda m, a: seen.append(tuple(a[0].shape[:2])) if a and
                                             isinstance(a[0], torch.Tensor) else None)
                 for m in model.modules() if isinstance(m, cls)]
        with torch.no_grad():
            ctx.forward(model, src, tgt[:, :-1])
        for h in hooks:
            h.remove()
        ctx.cache["pe_in_model"] = next((m for m in model.modules() if isinstance(m, cls)), None)
    except Exception:
        seen = []
    if seen and seen[0][0] == 3:
        ctx.cache["pe_layout"] = (1, T, d)
        return ((1, T, d),)
    if seen and seen[0][1] == 3:
        ctx.cache["pe_layout"] = (T, 1, d)
        return ((T, 1, d),)
    return ((1, T, d), (T, 1, d))


def table(ctx):
    T, d = 50, 64
    tol = bound("pe-formula").hi                 # float32 noise (checks.py)
    got, rec, mod = _table(ctx, T, d)
    want = formula(T, d)
    if ctx.cache.get("pe_random"):      # random numbers drawn in the positional encoding: no formula to judge
        return [check("pe-formula", "skip", None, f"max |PE - formula| {bound('pe-formula')}",
                      "could not measure: the positional encoding adds a different table on every call "
                      "(random numbers drawn in it; see eval-determinism)", data={"kind": "random"})]
    err = float((got - want).abs().max())
    swapped = torch.zeros(T, d)
    swapped[:, 0::2], swapped[:, 1::2] = want[:, 1::2], want[:, 0::2]
    kind = "ok" if err < tol else "sin-cos-swapped" if float((got - swapped).abs().max()) < tol else "frequencies"
    if kind == "frequencies" and column_order(got, want) is not None:
        # the lesson's channels in another order ([sin..., cos...] as fairseq lays them out): the same distinct
        # positions and the same relative offsets as fixed linear maps; only the pairwise swap is the lesson's bug
        err, kind = 0.0, "layout"
    in_model = _in_model_error(ctx, got.shape, T, d) if kind == "ok" else None
    if in_model is not None and in_model > tol:
        # right when built alone, wrong inside the model: the model's own initialisation overwrote the table
        err, kind = in_model, "overwritten"
    # Every row a row of the right table, at the wrong position: the formula is right, the indexing is not
    # (e.g. sliced by the batch size and broadcast over time).
    nearest = torch.cdist(got, formula(max(T, 512), d)).min(1)                 # (T,) distance, row index
    if kind == "frequencies" and float(nearest.values.max()) < 1e-4:
        kind = "indexing"
    trig = [c.line for c in rec.of("pe_math") if c.line and c.args and isinstance(c.args[0], torch.Tensor) and c.args[0].dim() == 2]
    div = [c.line for c in rec.of("pe_math") if c.line and c.args and isinstance(c.args[0], torch.Tensor) and c.args[0].dim() <= 1]
    line = (trig[0] if trig else None) if kind == "sin-cos-swapped" else (div[0] if div else trig[0] if trig else None)
    if kind == "indexing":
        rows = sorted(set(nearest.indices.tolist()))[:5]
        line = _forward_line(ctx, mod)
    if kind == "overwritten":
        line = _init_loop_line(ctx)
    if kind == "overwritten":
        data = {"kind": kind, "mechanism": {"kind": kind, "line": line, "text": "PositionalEncoding built on its own "
                "gives the sin/cos table, the one inside MiniTransformer does not: the model's initialisation "
                "(a loop over its parameters?) overwrites it"}}
    elif kind != "indexing":
        data = {"kind": kind}
    else:
        data = {"kind": kind, "mechanism": {
        "kind": "indexing", "line": line, "text": f"every position gets a row of the correct sin/cos table, but "
                                                  f"the wrong one (rows used: {rows}): the table is indexed by "
                                                  f"something other than the position"}}
    ctx.artifacts["pe_table"] = [[rnd(v, 3) for v in row] for row in got[:T].tolist()]
    ctx.artifacts["pe_diff"] = None if err < tol else [[rnd(v, 3) for v in row] for row in (got - want).tolist()]
    checks = [check("pe-formula", "pass" if err < tol else "fail", rnd(err, 6),
                    f"max |PE - formula| {bound('pe-formula')}", f"table {T}x{d}: {kind}", data=data,
                    location=ctx.where(line if err >= tol else None))]
    if mod is not None:
        params = [n for n, p in mod.named_parameters() if p.requires_grad]   # a frozen Parameter is a constant
        checks.append(check("pe-buffer", "pass" if not params else "fail", params,
                            "no parameters (register_buffer)",
                            "the positional table is constant" if not params else
                            f"the positional table is a trainable Parameter ({', '.join(params)})",
                            location=ctx.where(_parameter_line(ctx) if params else None)))
    return checks




def _in_model_error(ctx, shape, T, d) -> float | None:
    """max |table - formula| of the PositionalEncoding instance inside a fresh MiniTransformer."""
    mod = ctx.cache.get("pe_in_model")
    if mod is None:
        return None
    try:
        for layout in ((1, T, d), (T, 1, d)):
            with torch.no_grad(), ctx.student("PositionalEncoding.forward"):
                t = mod.eval()(torch.zeros(*layout, device=ctx.device)).reshape(T, d).cpu()
            if ctx.cache.get("pe_layout", layout) == layout:
                return float((t - formula(T, d)).abs().max())
    except Exception:
        return None
    return None


def _init_loop_line(ctx) -> int | None:
    """In MiniTransformer.__init__, the line that re-initialises parameters (nn.init.*, .data = ...)."""
    from . import locate
    for fn in locate.functions(ctx, "MiniTransformer.__init__"):
        hits = locate.lines_mentioning(fn, "nn.init.", "init.", ".normal_(", ".uniform_(", ".data")
        if hits:
            return hits[0]
    return None


def _forward_line(ctx, mod) -> int | None:
    """The line of PositionalEncoding.forward that adds the table (its first op on the input)."""
    from . import locate
    fns = locate.functions(ctx, "PositionalEncoding.forward")
    if not fns:
        return None
    body = [n.lineno for n in fns[0].body]
    return body[-1] if body else None


def _parameter_line(ctx):
    from . import locate
    hits = [ln for fn in locate.functions(ctx, "PositionalEncoding.__init__")
            for ln in locate.lines_mentioning(fn, "Parameter")]
    return hits[0] if hits else None


def long_inputs(ctx):
    """Lengths beyond the lesson's (up to the model's max_len) must run; accuracy there is not judged."""
    cls = ctx.need("MiniTransformer")
    max_len = default(cls, "max_len", 64)
    model = eval_model(ctx)
    results, failed = {}, None
    for L in (10, 20, 30, min(60, int(max_len) - 2)):
        src, tgt = batch(ctx, 2, L, L, seed_offset=12 + L)
        try:
            with torch.no_grad():
                ctx.forward(model, src, tgt[:, :-1], where=f"forward at source length {L}")
            results[L] = "ok"
        except StudentError as e:
            results[L] = cut(e, 200)
            failed = failed or (L, e)
    pe_len, pe_line = None, None
    for mod in model.modules():
        buf = getattr(mod, "pe", None)
        if isinstance(buf, torch.Tensor) and buf.dim() >= 2:
            pe_len, pe_line = int(buf.shape[-2]), ctx.built_at(mod)
    if failed is None:
        return [check("long-inputs", "pass", results, f"runs at every length up to max_len={max_len}",
                      "lengths 10-60 run", data={"pe_len": pe_len})]
    L, e = failed
    return [check("long-inputs", "fail", results, f"runs at every length up to max_len={max_len}",
                  f"fails at source length {L} (target input {L + 1}): {e}",
                  data={"first_failure": L, "pe_len": pe_len, "error": cut(e, 300), "error_line": e.line},
                  location=ctx.where(pe_line or e.line))]


# ---------------------------------------------------------------------------
# pe-relative: PE(pos + k) is a fixed rotation of PE(pos), pair by pair
# ---------------------------------------------------------------------------

REL_TOL = 1e-3   # correct tables (float32): <= 1.5e-5 at 50 positions, d=64; per-column frequencies: ~1


def column_order(got: torch.Tensor, want: torch.Tensor, tol: float = 1e-5):
    """The permutation p with got[:, j] == want[:, p[j]] for every column, or None (not the same channels)."""
    if got.shape != want.shape:
        return None
    dist = torch.cdist(got.double().T.contiguous(), want.double().T.contiguous(), p=float("inf"))
    best = dist.min(1)
    order = best.indices.tolist()
    if float(best.values.max()) > tol or len(set(order)) != len(order):
        return None
    return order


def pe_relative(ctx):
    """For every (sin, cos) column pair and offset k, one rotation maps PE(pos) to PE(pos + k) for all pos."""
    fn = ctx.need("positional_encoding")
    T, d = 50, 64
    with torch.no_grad(), ctx.student(f"positional_encoding({T}, {d})"):
        pe = fn(T, d)
    pe = output_tensor(pe, "positional_encoding").detach().reshape(T, d).double().cpu()
    if not bool(torch.isfinite(pe).all()):
        return [check("pe-relative", "fail", None, "a finite table", "the table has non-finite entries")]
    order = column_order(pe.float(), formula(T, d))
    if order is not None:       # the lesson's channels in another layout: judge them in the lesson's order
        pe = pe[:, torch.tensor(order).argsort()]
    per_k = {}
    for k in (1, 3, 10):
        a = pe[:-k].reshape(T - k, d // 2, 2)
        b = pe[k:].reshape(T - k, d // 2, 2)
        # the rotation that best maps a onto b, per pair (2-D Procrustes): angle = atan2(sum a x b, sum a . b)
        dot = (a * b).sum(-1).sum(0)
        cross = (a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]).sum(0)
        ang = torch.atan2(cross, dot)
        c, s = torch.cos(ang), torch.sin(ang)
        fit = torch.stack([c * a[..., 0] - s * a[..., 1], s * a[..., 0] + c * a[..., 1]], -1)
        per_k[k] = float((fit - b).abs().max())
    err = max(per_k.values())
    ok = err < REL_TOL
    return [check("pe-relative", "pass" if ok else "fail", rnd(err, 6), f"max error < {REL_TOL:g}",
                  f"table {T}x{d}: for each (sin, cos) column pair and k in 1, 3, 10, the best single rotation "
                  "R(k) with PE(pos + k) = R(k) PE(pos) for every pos; largest residual",
                  data={"per_k": {str(k): rnd(v, 6) for k, v in per_k.items()}})]
