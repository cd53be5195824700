"""Mutant fingerprints: when a component disagrees with the reference, does it agree with a known bug?

Each lm mutant is the reference with one described edit (mutants/lm_registry.py). For a failing
component, every mutant of that component runs on the same inputs as the student's code, on DRAWS
independent draws; when the student's outputs equal one mutant's on every draw (within the tolerance
a float32 re-implementation needs), that mutant's edit is the diagnosis. Agreement on several random
draws is what makes it near-certain: two different functions rarely agree on 5 random inputs.
"""
from __future__ import annotations

import types

import torch

from ....readable import cut
from .common import MARGIN, RTOL, RTOL_DEFAULT, Outcome, as_plain, call, to64

DRAWS = 5


def mutants_of(ctx, comp: str) -> list:
    """(mutant, module holding its adapters) for every lm mutant of this component; cached per run."""
    cache = ctx.cache.setdefault("lm_mutants", {})
    if comp not in cache:
        from mutants import LM_MUTANTS
        from mutants.lm_export import mutant_single_file     # the model or (interface mutants) the adapters edited
        out = []
        for m in LM_MUTANTS:
            if m.component.replace("_", "-") != comp:
                continue
            mod = types.ModuleType(f"mtxdiag_mutant_{m.id.replace('-', '_')}")
            exec(compile(mutant_single_file(m), f"<mutant {m.id}>", "exec"), mod.__dict__)
            out.append((m, mod))
        cache[comp] = out
    return cache[comp]


def same(comp: str, got: torch.Tensor, m64: torch.Tensor, m32: torch.Tensor) -> float | None:
    """The max abs difference when `got` equals the mutant's output (NaN/inf in the same places), else None."""
    if tuple(got.shape) != tuple(m64.shape):
        return None
    g, a = got.double(), m64.double()
    fin_g, fin_a = torch.isfinite(g), torch.isfinite(a)
    if not bool((fin_g == fin_a).all()):
        # an overflow bug overflows at the student's precision only: compare with the float32 run then
        a = m32.double()
        fin_a = torch.isfinite(a)
        if tuple(a.shape) != tuple(g.shape) or not bool((fin_g == fin_a).all()):
            return None
        m64 = torch.where(torch.isfinite(m64.double()), m64.double(), a)
    if not bool(fin_a.any()):
        return 0.0
    diff = (g[fin_a] - a[fin_a]).abs()
    scale = float(a[fin_a].abs().max())
    ok32 = torch.isfinite(m32.double()) & fin_a
    err32 = float((m32.double()[ok32] - a[ok32]).abs().max()) if bool(ok32.any()) else 0.0
    tol = MARGIN * err32 + RTOL.get(comp, RTOL_DEFAULT) * max(scale, 1e-3)
    worst = float(diff.max())
    return worst if worst <= tol else None


def match_cases(ctx, comp: str, make) -> dict | None:
    """Fingerprint a component checked by run_cases: make(seed) -> [(description, args builder)]."""
    from .common import ADAPTER, beyond_course
    cands = mutants_of(ctx, comp)
    if not cands:
        return None
    def student(build, desc):
        """The output, or ('raised', exception message) when the student's code raised (a bug may raise on some
        shapes only: x @ W with d_in != d_out)."""
        try:
            return as_plain(call(ctx, comp, build(), desc), comp, desc, ctx)
        except Outcome as o:
            d = o.check.get("data") or {}
            if d.get("kind") != "error" or not d.get("exception"):      # None, a timeout, an interface error
                raise
            return ("raised", cut(d.get("message", ""), 300))
    try:      # the student's outputs on every draw (None or a timeout now: no fingerprint)
        drawn = [[(desc, build, student(build, desc)) for desc, build in make(ctx.seed + 7919 * d)
                  if not beyond_course(desc)]
                 for d in range(DRAWS)]
    except Outcome:
        return None
    return _best(comp, cands, lambda mod: [
        [(got, _run(getattr(mod, ADAPTER[comp]), [to64(a) for a in build()], True),
          _run(getattr(mod, ADAPTER[comp]), build(), True)) for _, build, got in cases] for cases in drawn])


def match_outputs(ctx, comp: str, student_out, mutant_out, draws: int = DRAWS) -> dict | None:
    """Fingerprint from outputs computed by the probe: student_out(draw) -> [tensor],
    mutant_out(module, draw, dtype) -> [tensor] (optimizer, schedule, clipping)."""
    cands = mutants_of(ctx, comp)
    if not cands:
        return None
    try:
        drawn = [student_out(d) for d in range(draws)]
    except Outcome:
        return None
    return _best(comp, cands, lambda mod: [
        list(zip(outs, mutant_out(mod, d, torch.float64), mutant_out(mod, d, torch.float32)))
        for d, outs in enumerate(drawn)], draws)


def _run(fn, args, raised: bool = False):
    """The mutant's output; with raised, ('raised', exception message) when it raises."""
    try:
        with torch.no_grad():
            out = fn(*args)
    except Exception as e:               # noqa: BLE001 - our own mutant, on the student's inputs
        if not raised:
            raise
        return ("raised", cut(f"{type(e).__name__}: {cut(e, 400)}", 300))
    return out.detach() if isinstance(out, torch.Tensor) else out


def _best(comp, cands, triples_of, draws: int = DRAWS) -> dict | None:
    """The mutants whose outputs equal the student's on every draw; the first (registry order) is the match."""
    hits = []
    for m, mod in cands:
        try:
            outputs = triples_of(mod)
        except Exception:             # the mutant itself raises on these inputs (e.g. a shape bug): no match
            continue
        worst, numeric = 0.0, False
        for triples in outputs:
            for got, m64, m32 in triples:
                if isinstance(got, tuple) or isinstance(m64, tuple):   # raised: the same message as in float32
                    d = 0.0 if got == m32 and isinstance(m64, tuple) else None
                    numeric = numeric or d is not None
                elif isinstance(got, torch.Tensor) and isinstance(m64, torch.Tensor):
                    d = same(comp, got, m64, m32)
                    numeric = numeric or d is not None
                else:
                    d = None
                if d is None:
                    worst = None
                    break
                worst = max(worst, d)
            if worst is None:
                break
        if worst is not None and numeric:      # every case agrees: in numbers or in the exception's message
            hits.append({"mutant": m.id, "cause": m.cause, "summary": m.summary, "max_abs": float(f"{worst:.3g}"),
                         "draws": draws, "fix": getattr(m, "fix", "") or m.lesson, "explanation": m.explanation})
    if not hits:
        return None
    best = dict(hits[0])
    best["also_matches"] = [h["mutant"] for h in hits[1:]]
    return best
