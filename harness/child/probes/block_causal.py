"""Block probe of the exercise: with the causal flag on, no position sees a later one (block-causal)."""
from __future__ import annotations

import ast

import torch

from ..intercept import attention_weights
from .base import check, rnd
from .block import (calls_to, causal_form, forward_statements, heads, inputs, make_block, record, run_block,
                    weight_lists)


# ---------------------------------------------------------------------------
# the student's line for a causal failure
# ---------------------------------------------------------------------------

def _call_line(ctx, line, names=("triu", "tril")) -> int | None:
    """The line of the `diagonal=` argument of a triu/tril call that starts or spans `line`."""
    try:
        tree = ast.parse(ctx.source.text)
    except SyntaxError:
        return line
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.lineno <= line <= (node.end_lineno or node.lineno):
            fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if fn in names:
                for kw in node.keywords:
                    if kw.arg == "diagonal":
                        return kw.value.lineno
                if len(node.args) > 1:
                    return node.args[1].lineno
    return line


def _attn_names(block) -> set:
    """Names of the block's sub-modules that do attention (their class or name says so)."""
    names = set()
    for name, mod in block.named_children():
        label = (name + type(mod).__name__).lower()
        if "attn" in label or "attention" in label:
            names.add(name)
    return names or {"attn"}


def _attn_call_line(ctx, block) -> int | None:
    """The line of TransformerBlock.forward that calls the attention sub-module."""
    names = _attn_names(block)
    lines = sorted(s.lineno for s in forward_statements(ctx) if calls_to(s, names))
    return lines[0] if lines else None


# ---------------------------------------------------------------------------
# block-causal: the exercise
# ---------------------------------------------------------------------------

ZERO = 1e-6        # correct code: exactly 0.0 above the diagonal and for earlier outputs (masked weights are 0)
PAST_FRAC = 0.5    # correct code: 1.0 of (later output, earlier token) pairs connected; inverted mask: 0.0


def _applied_mechanism(ctx, block, fw, d) -> str | None:
    """The mechanism read from the weights that multiply V (7 tokens: no other axis has that length)."""
    from . import mechanism, trace
    x = inputs(ctx, 7, d, offset=4)
    kind = mechanism.causal_mechanism(trace.record(ctx, lambda: run_block(ctx, block, x, fw)), 7).get("kind")
    return kind if kind in ("after-softmax", "renormalised") else None


def _symmetric_bias(ctx, block, fw, d, w) -> dict | None:
    """A causal leak with no mask: is it a token-independent symmetric bias (an ALiBi built with abs())?
    Its origin statement and values (causal_bias.py), with the weight the later keys got (w: the causal weights)."""
    from .causal_bias import symmetric_bias
    bias = symmetric_bias(ctx, lambda x: run_block(ctx, block, x, fw), inputs(ctx, 7, d, offset=4),
                          inputs(ctx, 7, d, offset=8), 7)
    if bias and w is not None and w.size(-1) == w.size(-2):
        share = torch.nan_to_num(w, nan=0.0).triu(1).sum(-1)[..., :-1]     # each row's weight on later keys
        bias.update(future_weight_mean=rnd(float(share.mean()), 4), future_weight_max=rnd(float(share.max()), 4))
    return bias


def _leak_divergence(ctx, block, fw, d) -> dict | None:
    """The first op whose output for earlier tokens changes when token 5 of 7 changes."""
    from . import trace
    x = inputs(ctx, 7, d, offset=5)
    x2 = x.clone()
    x2[5] += inputs(ctx, d, offset=6)
    a = trace.record(ctx, lambda: run_block(ctx, block, x, fw))
    b = trace.record(ctx, lambda: run_block(ctx, block, x2, fw))
    return trace.describe(ctx, trace.first_divergence(a, b, trace.prefix_unchanged(7, 5)),
                          "outputs before token 5 depend on token 5")


def causal(ctx):
    """With the causal flag on: zero upper triangle, earlier outputs blind to later tokens, every row finite."""
    form = causal_form(ctx)
    if form is None:
        return [check("block-causal", "skip", None, "a causal flag",
                      "TransformerBlock takes no `causal` argument (neither in __init__ nor in forward): "
                      "the exercise is not done, so the causal checks are skipped")]
    T, d = 8, 16
    block = make_block(ctx, d, 2, 32, causal=form == "init")
    fw = form == "forward"
    how = "TransformerBlock(16, 2, 32, causal=True)" if not fw else "block(x, causal=True)"
    x = inputs(ctx, T, d, offset=3)
    base, rec = record(ctx, lambda: run_block(ctx, block, x, fw))
    weights = attention_weights(rec)
    # dependency of each output on each input token: dep[i, j] = change of output i when token j changes
    dep = torch.zeros(T, T)
    with torch.no_grad():
        for j in range(T):
            x2 = x.clone()
            x2[j] += inputs(ctx, d, offset=100 + j)
            out = run_block(ctx, block, x2, fw)
            dep[:, j] = torch.nan_to_num((out - base).abs(), nan=0.0).max(-1).values.cpu()
    future = float(dep.triu(1).max())
    n_past = T * (T - 1) // 2
    past_frac = float((dep.tril(-1) > ZERO).sum()) / n_past
    out_rows_bad = [i for i in range(T) if not bool(torch.isfinite(base[i]).all())]

    m = {"future_change": rnd(future, 6), "nonfinite_output_rows": out_rows_bad}
    if weights:
        w = heads(weights[0]).float().cpu()
        ctx.artifacts.setdefault("block_weights", {})["causal"] = weight_lists(w)
        finite = torch.isfinite(w)
        rows_bad = [i for i in range(T) if not bool(finite[:, i].all())] if w.size(-1) == T else []
        upper = float(torch.nan_to_num(w, nan=0.0).triu(1).abs().max())
        past = float(torch.nan_to_num(w, nan=0.0).tril(-1).abs().max())
        diag = torch.nan_to_num(w, nan=0.0).diagonal(dim1=-2, dim2=-1)[:, 1:]
        diag_zero = bool((diag == 0).all())
        m.update(upper_max=rnd(upper, 6), nonfinite_weight_rows=rows_bad)
        if 0 in rows_bad or (diag_zero and w.size(-1) > 1):
            kind = "diagonal"
        elif upper > ZERO:
            kind = "missing" if past > ZERO else "inverted"
            if kind == "missing":      # the softmax is unmasked: is a mask applied to what multiplies V instead?
                kind = _applied_mechanism(ctx, block, fw, d) or kind
        elif rows_bad or out_rows_bad:
            kind = "nonfinite"
        elif future > ZERO:
            kind = "leak"
        else:
            kind = "ok"
    else:
        m.update(upper_max=None)
        if 0 in out_rows_bad:
            kind = "diagonal"
        elif out_rows_bad:
            kind = "nonfinite"
        elif future > ZERO:
            kind = "missing" if past_frac >= PAST_FRAC else "inverted"
        else:
            kind = "ok"
    bias = _symmetric_bias(ctx, block, fw, d, w if weights else None) if kind == "missing" else None
    if bias:
        kind = "symmetric-bias"
    details = {
        "ok": "upper triangle exactly 0, earlier outputs unchanged by later tokens, every row finite",
        "missing": "the causal block attends to later positions (weights above the diagonal are not 0) and "
                   "to earlier ones: the mask is not applied",
        "inverted": "the causal block attends to later positions and not to earlier ones: the mask blanks out "
                    "the past instead of the future",
        "diagonal": "the mask hides the diagonal too: the first row has nothing left to attend to "
                    f"({'NaN' if 0 in m.get('nonfinite_weight_rows', out_rows_bad) else 'its weights'}), "
                    "and no position sees its own token",
        "nonfinite": f"non-finite attention or output rows {m.get('nonfinite_weight_rows') or out_rows_bad}",
        "leak": "the weights above the diagonal are 0, yet earlier outputs change when a later token changes: "
                "information from the future reaches them another way",
        "after-softmax": "the softmax normalises over every key, later ones included, and the mask is applied to "
                         "its output: each row's weights still depend on later tokens",
        "renormalised": "a masked softmax gives later keys 0, but the weights multiplied with V give them weight "
                        "again: the weights that multiply V are not the softmax of the masked scores",
        "symmetric-bias": "no mask reaches the softmax, and the only thing between a query and the keys ahead is "
                          "a position bias that does not depend on the tokens and mirrors itself (b[i, j] = "
                          "b[j, i], finite): the keys ahead get a distance penalty, not -inf"
                          + (f" (line {bias['line']}: `{bias['code'][:80]}`; on average "
                             f"{bias.get('future_weight_mean', 0):.0%} of a row's weight goes to later keys)"
                             if bias else ""),
    }
    lines = [c.line for op in ("masked_fill", "triu", "tril") for c in rec.of(op) if c.line]
    line = min(lines) if lines else None
    if line is not None and kind == "diagonal":
        line = _call_line(ctx, line)           # the diagonal= argument of the triu/tril call
    if kind == "missing" and not lines:
        line = _attn_call_line(ctx, block)     # the mask is never built: point at the attention call
    if bias:
        line = bias["line"]                    # the statement that builds the bias: its origin
    div = _leak_divergence(ctx, block, fw, d) if kind == "leak" else None
    if div:
        line = div["line"]
    ok = kind == "ok"
    return [check("block-causal", "pass" if ok else "fail", m,
                  "0 above the diagonal; earlier outputs independent of later tokens; finite rows",
                  f"{how}, {T} tokens: {details[kind]}; {past_frac:.0%} of (later output, earlier token) "
                  "pairs connected",
                  data={"kind": kind, "form": form, "future": rnd(future, 6), "past_fraction": rnd(past_frac, 3),
                        "divergence": div, **({"bias": bias} if bias else {}),
                        "dependency": [[rnd(v, 4) for v in row] for row in dep.tolist()]},
                  location=ctx.where(line if not ok else None))]


# ---------------------------------------------------------------------------
# block-causal-off: the flag is honoured when False (measured before any probe assumes it)
# ---------------------------------------------------------------------------

def causal_off(ctx):
    """With the causal flag off (the default the other block probes use), earlier outputs see later tokens.

    A block that masks regardless of the flag fails every probe that assumes attention over all tokens
    (permutation, saturation): those skip with this reason, and the flag itself is named."""
    form = causal_form(ctx)
    if form is None:
        return [check("block-causal-off", "skip", None, "", "TransformerBlock takes no `causal` argument")]
    T, d = 8, 16
    block = make_block(ctx, d, 2, 32)
    x = inputs(ctx, T, d, offset=7)
    base, rec = record(ctx, lambda: run_block(ctx, block, x))
    future = past = 0.0
    with torch.no_grad():
        for j in range(T):
            x2 = x.clone()
            x2[j] += inputs(ctx, d, offset=200 + j)
            change = torch.nan_to_num((run_block(ctx, block, x2) - base).abs(), nan=0.0).max(-1).values
            future = max(future, float(change[:j].max()) if j else 0.0)
            past = max(past, float(change[j + 1:].max()) if j < T - 1 else 0.0)
    if past <= ZERO:
        return [check("block-causal-off", "skip", None, "", "no output depends on another token (causal off): the "
                                                              "flag cannot be judged")]
    ok = future > ZERO
    if not ok:
        ctx.cache["causal_off_ignored"] = True
    lines = [c.line for op in ("masked_fill", "triu", "tril", "where") for c in rec.of(op) if c.line]
    line = _constant_flag_line(ctx, min(lines) if lines else None) or \
        (min(lines) if lines else _attn_call_line(ctx, block))
    how = "TransformerBlock(16, 2, 32)" if form == "init" else "block(x) (causal not passed)"
    text = (f"{how}: earlier outputs do not change when a later token changes (largest change {future:.1e}) while "
            f"later outputs follow earlier tokens: the block masks the future although causal is False")
    return [check("block-causal-off", "pass" if ok else "fail", rnd(future, 6),
                  f"> {ZERO:g}: with causal=False earlier outputs see later tokens",
                  "largest change of an earlier output when a later token changes, causal off" if ok else text,
                  data={"form": form, "mechanism": {"kind": "flag-ignored", "text": text}} if not ok else
                  {"form": form}, location=ctx.where(line if not ok else None))]


def _constant_flag_line(ctx, mask_line) -> int | None:
    """Where the flag stops flowing: an `if` with a constant test around the mask, or a call in
    TransformerBlock.forward that passes a constant True as a causal-like keyword."""
    if mask_line:
        try:
            tree = ast.parse(ctx.source.text)
        except SyntaxError:
            tree = None
        for node in ast.walk(tree) if tree else ():
            if isinstance(node, (ast.If, ast.IfExp)) and isinstance(node.test, ast.Constant) and node.test.value \
                    and node.lineno <= mask_line <= (node.end_lineno or node.lineno):
                return node.lineno
    for stmt in forward_statements(ctx):
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Call):
                for kw in sub.keywords:
                    if kw.arg and "causal" in kw.arg and isinstance(kw.value, ast.Constant) and kw.value.value is True:
                        return kw.value.lineno
    return None


def assumes_flag_off(ctx) -> None:
    """Probes that need attention over every token skip when the block is causal with the flag off."""
    if ctx.cache.get("causal_off_ignored"):
        from .base import Skip
        raise Skip("the block masks later tokens although causal is False (block-causal-off): a property of "
                   "attention over all tokens cannot be measured")
