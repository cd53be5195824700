"""`lm` probes, first round: every model component's adapter against the reference's, on seeded inputs.

Shapes are chosen to catch what the course's fixed shapes do not: leading
batch dimensions, queries != keys, token positions that are neither 0..T-1 nor
contiguous, sequences longer than the usual 12 tokens, activations small
enough for RMSNorm's eps to matter and logits large enough to overflow exp().
Only inputs the adapter's documented contract allows are used (1-D token
positions, (batch, seq) token ids), so correct code that passes the course's
tests is never asked for more.
"""
from __future__ import annotations

import functools
import math

import torch

from ..base import check
from .common import BEYOND, gen, reference_files, run_cases
from .fingerprint import match_cases


def _course(desc: str, course: bool) -> str:
    return desc if course else desc + BEYOND


def seeded_randn(g, *shape, scale=1.0):
    return torch.randn(*shape, generator=g) * scale


def _w(g, d_out, d_in):
    return torch.randn(d_out, d_in, generator=g) / math.sqrt(d_in)   # (d_out, d_in), unit-scale outputs


def _case(seed, k, make):
    """A builder that rebuilds the same arguments on every call (the student may modify them in place)."""
    return lambda: make(gen(seed, k))


def linear_cases(seed):
    # the course passes (batch, seq, d_in); 2-D and 4-D inputs are what the signature merely allows
    shapes = [(16, 24, (5, 16)), (32, 8, (2, 3, 7, 32)), (64, 64, (1, 64)), (16, 24, (2, 5, 16)), (64, 64, (1, 3, 64))]
    return [(_course(f"d_in={i} d_out={o} x{list(x)}", len(x) == 3), _case(seed, k, lambda g, i=i, o=o, x=x:
                                                      (i, o, _w(g, o, i), seeded_randn(g, *x))))
            for k, (i, o, x) in enumerate(shapes)]


def embedding_cases(seed):
    shapes = [(50, 16, (4, 9)), (20, 8, (2, 3, 5)), (100, 32, (7,))]
    return [(f"vocab={v} d={d} ids{list(s)}", _case(seed, 10 + k, lambda g, v=v, d=d, s=s:
                                                    (v, d, seeded_randn(g, v, d), torch.randint(0, v, s, generator=g))))
            for k, (v, d, s) in enumerate(shapes)]


def rmsnorm_cases(seed):
    # scale 1e-3: the mean square (1e-6) is below eps, so where eps goes matters; scale 30: large activations
    # (batch, seq, d_model) as the course passes it; a 2-D input last, beyond the course's inputs
    shapes = [((2, 7, 16), 1.0, 1e-5), ((1, 3, 16), 1e-3, 1e-5), ((2, 5, 16), 30.0, 1e-5), ((1, 4, 16), 1e-3, 1e-3),
              ((3, 16), 1.0, 1e-5)]
    out = [(_course(f"x{list(x)} scale {sc} eps {eps}", len(x) == 3), _case(seed, 20 + k, lambda g, x=x, sc=sc, eps=eps:
                                                      (x[-1], eps, 1 + 0.2 * seeded_randn(g, x[-1]),
                                                       seeded_randn(g, *x, scale=sc))))
           for k, (x, sc, eps) in enumerate(shapes)]
    # float16 activations of ~300: their squares (9e4) overflow float16 (max 65504) unless upcast first
    out.append(("x[1, 3, 16] float16 scale 300", _case(seed, 29, lambda g: (
        16, 1e-5, (1 + 0.2 * seeded_randn(g, 16)).half(), seeded_randn(g, 1, 3, 16, scale=300.0).half()))))
    return out


def silu_cases(seed):
    return [("x[4, 11] in [-10, 10]", _case(seed, 30, lambda g: (seeded_randn(g, 4, 11, scale=5.0),))),
            ("x[2, 3, 8]", _case(seed, 31, lambda g: (seeded_randn(g, 2, 3, 8),)))]


def swiglu_cases(seed):
    shapes = [(16, 40, (2, 6, 16)), (32, 24, (5, 32)), (32, 24, (1, 5, 32))]
    return [(_course(f"d_model={d} d_ff={f} x{list(x)}", len(x) == 3), _case(seed, 40 + k, lambda g, d=d, f=f, x=x:
                                                       (d, f, _w(g, f, d), _w(g, d, f), _w(g, f, d), seeded_randn(g, *x))))
            for k, (d, f, x) in enumerate(shapes)]


def softmax_cases(seed):
    rows = [((3, 7), -1, 0.0), ((2, 5, 9), 1, 0.0), ((4, 6), -1, 100.0), ((2, 3, 4), 0, 0.0)]
    return [(f"x{list(s)} dim={d}" + (f" + {off:g}" if off else ""),
             _case(seed, 50 + k, lambda g, s=s, d=d, off=off: (seeded_randn(g, *s, scale=3.0) + off, d)))
            for k, (s, d, off) in enumerate(rows)]


def _mask(g, *shape):
    m = torch.rand(*shape, generator=g) > 0.4
    m[..., 0] = True      # every query may attend to at least one key (a fully masked row is undefined)
    return m


def sdpa_cases(seed):
    return [
        ("Q[2, 5, 8] K,V[2, 7, 8|6] with mask", _case(seed, 60, lambda g: (
            seeded_randn(g, 2, 5, 8), seeded_randn(g, 2, 7, 8), seeded_randn(g, 2, 7, 6), _mask(g, 2, 5, 7)))),
        ("Q[2, 3, 4, 8] K,V[2, 3, 6, 8] 4-D with mask", _case(seed, 61, lambda g: (
            seeded_randn(g, 2, 3, 4, 8), seeded_randn(g, 2, 3, 6, 8), seeded_randn(g, 2, 3, 6, 8), _mask(g, 2, 3, 4, 6)))),
        (_course("Q[1, 6, 16] K,V[1, 6, 16] no mask", False), _case(seed, 62, lambda g: (
            seeded_randn(g, 1, 6, 16), seeded_randn(g, 1, 6, 16), seeded_randn(g, 1, 6, 16), None))),
    ]


def rope_cases(seed):
    rows = [((2, 9, 16), list(range(9))), ((3, 6, 16), [3, 4, 7, 11, 12, 20]),
            ((1, 40, 16), list(range(10, 50)))]
    return [(f"x{list(x)} positions {pos[:3]}...{pos[-1]}", _case(seed, 70 + k, lambda g, x=x, pos=pos: (
        x[-1], 10000.0, 64, seeded_randn(g, *x), torch.tensor(pos))))
        for k, (x, pos) in enumerate(rows)]


def mha_weights(g, d):
    return tuple(_w(g, d, d) for _ in range(4))


def mha_cases(seed):
    rows = [(32, 4, (2, 7, 32)), (32, 4, (1, 1, 32)), (32, 2, (3, 20, 32))]
    return [(f"d_model={d} heads={h} x{list(x)}", _case(seed, 80 + k, lambda g, d=d, h=h, x=x: (
        d, h, *mha_weights(g, d), seeded_randn(g, *x)))) for k, (d, h, x) in enumerate(rows)]


def mha_rope_cases(seed):
    rows = [(32, 4, (2, 7, 32), list(range(7))), (32, 4, (2, 6, 32), [2, 3, 5, 8, 13, 21]),
            (32, 2, (1, 30, 32), list(range(5, 35)))]
    # the course passes positions of shape (1, seq); 1-D positions are what the signature merely allows
    out = [(f"d_model={d} heads={h} x{list(x)} positions[1, {len(pos)}] {pos[:3]}...{pos[-1]}",
            _case(seed, 90 + k, lambda g, d=d, h=h, x=x, pos=pos: (
                d, h, 64, 10000.0, *mha_weights(g, d), seeded_randn(g, *x), torch.tensor(pos)[None])))
           for k, (d, h, x, pos) in enumerate(rows)]
    d, h, x, pos = rows[0]
    out.append((_course(f"d_model={d} heads={h} x{list(x)} 1-D positions {pos[:3]}...{pos[-1]}", False),
                _case(seed, 90, lambda g: (d, h, 64, 10000.0, *mha_weights(g, d), seeded_randn(g, *x),
                                           torch.tensor(pos)))))
    return out


def block_weights(g, d, d_ff, prefix=""):
    w = {}
    for n in ("q_proj", "k_proj", "v_proj", "output_proj"):
        w[f"{prefix}attn.{n}.weight"] = _w(g, d, d)
    w[f"{prefix}ln1.weight"] = 1 + 0.2 * seeded_randn(g, d)
    w[f"{prefix}ffn.w1.weight"] = _w(g, d_ff, d)
    w[f"{prefix}ffn.w2.weight"] = _w(g, d, d_ff)
    w[f"{prefix}ffn.w3.weight"] = _w(g, d_ff, d)
    w[f"{prefix}ln2.weight"] = 1 + 0.2 * seeded_randn(g, d)
    return w


def block_cases(seed):
    rows = [(32, 4, 48, (2, 7, 32)), (32, 2, 64, (1, 16, 32))]
    out = [(f"d_model={d} heads={h} d_ff={f} x{list(x)}", _case(seed, 100 + k, lambda g, d=d, h=h, f=f, x=x: (
        d, h, f, 64, 10000.0, block_weights(g, d, f), seeded_randn(g, *x)))) for k, (d, h, f, x) in enumerate(rows)]
    ckpt = trained()
    if ckpt:      # the trained checkpoint's first layer, on embeddings of random tokens
        cfg, sd = ckpt
        layer = {k[len("layers.0."):]: v for k, v in sd.items() if k.startswith("layers.0.")}
        emb = sd["token_embeddings.weight"]
        out.append(("trained layer 0, x[2, 20, d]", _case(seed, 109, lambda g: (
            cfg["d_model"], cfg["num_heads"], cfg["d_ff"], cfg["context_length"], cfg["rope_theta"],
            {k: v.clone() for k, v in layer.items()}, emb[torch.randint(0, cfg["vocab_size"], (2, 20), generator=g)]))))
    return out


def lm_weights(g, vocab, d, layers, d_ff):
    w = {"token_embeddings.weight": seeded_randn(g, vocab, d)}
    for i in range(layers):
        w.update(block_weights(g, d, d_ff, f"layers.{i}."))
    w["ln_final.weight"] = 1 + 0.2 * seeded_randn(g, d)
    w["lm_head.weight"] = _w(g, vocab, d)
    return w


@functools.lru_cache(maxsize=1)
def trained():
    """The reference's tiny trained checkpoint (reference_model/lm_tiny.*) as (config, state dict), or None."""
    import json
    from pathlib import Path

    import reference_model
    here = Path(reference_model.__file__).parent
    try:
        config = json.loads((here / "lm_tiny.json").read_text())["config"]
        return config, torch.load(here / "lm_tiny.pt", weights_only=True)
    except (OSError, KeyError, ValueError, RuntimeError):
        return None


def lm_cases(seed):
    rows = [(64, 32, 32, 2, 4, 48, (2, 9)), (50, 24, 32, 1, 2, 64, (1, 24))]
    out = [(f"vocab={v} layers={n} heads={h} ids{list(s)}", _case(seed, 110 + k,
           lambda g, v=v, c=c, d=d, n=n, h=h, f=f, s=s: (
               v, c, d, n, h, f, 10000.0, lm_weights(g, v, d, n, f), torch.randint(0, v, s, generator=g))))
           for k, (v, c, d, n, h, f, s) in enumerate(rows)]
    ckpt = trained()
    if ckpt:      # trained weights: sharper attention and larger activations than random ones
        cfg, sd = ckpt
        keys = ("vocab_size", "context_length", "d_model", "num_layers", "num_heads", "d_ff", "rope_theta")
        out.append((f"trained checkpoint, ids[2, {cfg['context_length']}]", _case(seed, 119, lambda g: (
            *(cfg[k] for k in keys), {k: v.clone() for k, v in sd.items()},
            torch.randint(0, cfg["vocab_size"], (2, cfg["context_length"]), generator=g)))))
    return out


CASES = {"linear": (linear_cases, "leading batch dims"), "embedding": (embedding_cases, "several id shapes"),
         "rmsnorm": (rmsnorm_cases, "small and large activations"), "silu": (silu_cases, "wide range"),
         "swiglu": (swiglu_cases, "two widths"), "softmax": (softmax_cases, "other dims, logits + 100"),
         "sdpa": (sdpa_cases, "queries != keys, 3-D and 4-D, masks"),
         "rope": (rope_cases, "non-contiguous positions with an offset, 40 tokens"),
         "mha": (mha_cases, "1 to 20 tokens"), "mha-rope": (mha_rope_cases, "offset positions, 30 tokens"),
         "block": (block_cases, "random weights"), "lm": (lm_cases, "random weights, full context")}


def probe(comp: str):
    """The probe function for one component (registered in probes/__init__.py)."""
    make, what = CASES[comp]

    def fn(ctx):
        checks = run_cases(ctx, comp, make(ctx.seed), what, redraw=make, fingerprint=match_cases)
        return [diagnose_further(ctx, comp, c) for c in checks]
    fn.__name__ = f"lm_{comp.replace('-', '_')}"
    return fn


def diagnosed(comp: str, probe_fn):
    """A probe whose failing check gets harness.child.probes.lm.diag's diagnosis too (see diagnose_further), and a location
    (see locate_training)."""
    def fn(ctx):
        return [diagnose_further(ctx, comp, locate_training(ctx, comp, c)) for c in probe_fn(ctx)]
    fn.__name__ = probe_fn.__name__
    return fn


def locate_training(ctx, comp: str, c: dict) -> dict:
    """Where a failing optimizer, clipping or schedule goes wrong (probes/lm_divergence.py): the student's and
    the reference's code on one small failing input, op by op (tensors) or line by line (plain numbers)."""
    if c.get("status") != "fail" or c.get("location") or comp not in ("adamw", "gradient-clipping", "lr-schedule"):
        return c
    from ... import lm_loader
    from . import divergence as div
    from .common import ADAPTER, reference
    try:
        with ctx.student(f"{ADAPTER[comp]} (first divergence)", seconds=ctx.budget(10.0)):
            found = _locate_training(ctx, comp, c, div, dict(lm_loader.STATE.files), reference())
    except Exception:                # noqa: BLE001 - locating is extra evidence; it never breaks the check
        return c
    if found:
        c["data"]["divergence"] = found
        c["location"] = {"file": found["file"], "line": found["line"]}
    return c


def _locate_training(ctx, comp, c, div, files, ref):
    from . import training as tr
    if comp == "lr-schedule":        # the first iteration that differs, on its setting
        import ast
        row = next((r for r in (c.get("data") or {}).get("cases", []) if r.get("first_bad_it") is not None), None)
        if row is None:
            return None
        args = (row["first_bad_it"], *ast.literal_eval(row["case"].split("=", 1)[1].strip()))
        mine = div.record_values(files, ctx.module.run_get_lr_cosine_schedule, args)
        theirs = div.record_values(reference_files(), ref.run_get_lr_cosine_schedule, args)
        return div.first_new_number(mine, theirs, args)
    if comp == "adamw":              # one step with tiny gradients (where eps shows) and one with unit ones
        hp = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
        runs = []
        for scale in (1.0, 1e-4):
            def setup(scale=scale):
                params = tr._params(ctx.seed, 130)
                tr._grads(params, 0, ctx.seed, scale)
                return params
            runs.append((setup, lambda cls, params: cls(params, **hp).step(),
                         lambda params: [params[0].detach().clone(), params[0].grad.clone()] +
                         [p.detach().clone() for p in params[1:]], ctx.module.get_adamw_cls(), ref.get_adamw_cls()))
        return _first(div, files, runs, rtol=1e-6)
    runs = []                        # gradient clipping: above and below the limit
    for k, (scale, max_norm, _) in enumerate(tr.CLIP_CASES):
        runs.append((lambda k=k, scale=scale: tr._clip_setup(ctx.seed, k, scale),
                     lambda fn, ps, m=max_norm: fn(ps, m),
                     lambda ps: [p.detach().clone() for p in ps] + [p.grad.clone() for p in ps if p.grad is not None],
                     ctx.module.run_gradient_clipping, ref.run_gradient_clipping))
    return _first(div, files, runs, rtol=1e-5, result=lambda ps: ps[0].grad)


def _first(div, files, runs, rtol, result=lambda params: params[0]):
    """The first run whose results differ from the reference's: its first divergence."""
    for setup, run, inputs, mine_obj, ref_obj in runs:
        a, b = setup(), setup()
        given = inputs(a)
        mine, _ = div.record(files, run, (mine_obj, a), numbers=True)
        theirs, _ = div.record(reference_files(), run, (ref_obj, b))
        got, want = result(a), result(b)
        got = got.detach() if got is not None else None      # a parameter's value, not its graph
        want = want.detach() if want is not None else None
        if got is None or want is None or got.shape != want.shape or \
                float((got.double() - want.double()).abs().max()) <= rtol * float(want.abs().max()):
            continue
        return div.first_divergence(mine, got, theirs, given, rtol, expected=want)
    return None


# a component's check of these kinds did not run the component's own code to an answer: nothing to replay
NOT_REPLAYED = ("missing-module", "timeout", "not-implemented", "absent")


def replay_course(ctx, comp: str, c: dict) -> dict:
    """A failing component replayed as the course's own tests call it (diag/course.py): `data.course_replay`
    says whether those tests would fail too; the parent ranks by it (harness/causes/lm_rank.py). Nothing is
    recorded when the replay could not finish (a timeout, mtxdiag's own failure)."""
    d = c.get("data") or {}
    if c.get("status") not in ("fail", "error") or c.get("id") != f"lm-{comp}" or d.get("kind") in NOT_REPLAYED:
        return c
    from .common import ADAPTER
    from .diag.course import replay
    fn = getattr(ctx.module, ADAPTER.get(comp, ""), None)
    if fn is None:
        return c
    try:
        with ctx.student(f"{ADAPTER[comp]} (the course's inputs)", seconds=ctx.budget(20.0)):
            r = replay(comp, fn)
    except Exception:                # noqa: BLE001 - the replay is extra evidence; it never breaks the check
        return c
    if r is not None:
        c.setdefault("data", {})["course_replay"] = r
    return c


def diagnose_further(ctx, comp: str, c: dict) -> dict:
    """A failing component no fingerprint explains: harness.child.probes.lm.diag's measurements of it (interface, its own
    fingerprint, swapped arguments, properties, on its own seeded inputs) as data; the parent's rule decides
    what they name (harness/causes/lm_decide.py). Every failing component is also replayed on the course's
    inputs (replay_course)."""
    c = replay_course(ctx, comp, c)
    if c.get("status") != "fail" or c.get("id") != f"lm-{comp}" or (c.get("data") or {}).get("fingerprint"):
        return c
    from .diag.diagnose import measure_component
    from .common import ADAPTER
    fn = getattr(ctx.module, ADAPTER.get(comp, ""), None)
    if fn is None:
        return c
    with ctx.student(f"{ADAPTER[comp]} (diagnosis)", seconds=ctx.budget(20.0)):
        m = measure_component(comp, fn)
    if m.get("status") == "fail":
        c["data"]["lmdiag_measured"] = m
    return c


def contract(ctx):
    """Which adapters exist; imports that failed (bound to placeholders); what is out of scope."""
    from ... import lm_loader
    names = vars(ctx.module)
    defined = [n for n in lm_loader.ADAPTERS if callable(names.get(n))]
    missing = [n for n in lm_loader.ADAPTERS if n not in defined]
    notes = [dict(n) for n in lm_loader.STATE.notes][:50]
    data = {"defined": defined, "missing": missing, "import_failures": notes,
            "out_of_scope": [n for n in lm_loader.OUT_OF_SCOPE if n in names]}
    out = []
    if not defined:
        out.append(check("contract", "fail", {"missing": missing}, "the CS336 adapter functions (run_linear, ...)",
                         "none of the adapter functions is defined", data=data))
        return out
    out.append(check("contract", "pass", {"defined": len(defined), "missing": missing}, "the adapter functions",
                     f"{len(defined)} of {len(lm_loader.ADAPTERS)} adapters defined", data=data))
    if notes:
        shown = "; ".join(f"{n['file']} line {n['line']}: {n['error']}" for n in notes[:4])
        out.append(check("lm-imports", "info", {"failed_imports": len(notes)}, "",
                         f"imports that failed (the names they bind raise only when used): {shown}", data=data))
    env = [dict(n) for n in lm_loader.STATE.environment][:20]
    if env:      # the grader's Python, not the student's code: a note, never a failure
        out.append(check("lm-environment", "info", {"newer_python": [n["name"] for n in env]}, "",
                         "; ".join(f"{n['file']} line {n['line']}: {n['note']}" for n in env[:4]),
                         data={"environment": env}, location={"file": env[0]["file"], "line": env[0]["line"]}))
    out.append(check("lm-out-of-scope", "skip", None, "", "tokenizer, BPE training and checkpointing adapters "
                     f"are not checked (out of scope): {', '.join(lm_loader.OUT_OF_SCOPE)}", data=data))
    return out
