"""What the `lm` probes share: the component table, running one adapter, and comparing with the reference.

Each component is checked the same way: its adapter runs on seeded inputs of
several shapes; the reference's adapter runs on the same inputs in float64
(the expected value) and in float32 (how far a correct float32 implementation
may be from float64). A component passes when every case is within tolerance.
"""
from __future__ import annotations

import torch

from ....readable import cut
from ... import lm_loader, trusted
from ....lm_table import ADAPTER, COMPONENTS, DEPS  # noqa: F401  (re-exported for the probes)
from .diag.inputs import raised_by_torch
from .where import interface_location, interface_sides, module_called
from ..base import ProbeTimeout, StudentError, check, rnd

# The component table lives in harness/lm_table.py (no torch there: the parent reads it too).

# Relative tolerance floor (of the largest reference value), on top of 100x the float32 reference's own error.
# Measured: reference float32 vs float64 is 1e-7..2e-6 relative; float32 angles computed as position * freq
# (instead of in float64) move RoPE outputs by up to ~4e-6 relative at position 64. The floors leave 10x
# over that; the smallest bug in the mutant library moves outputs by >1e-2 relative on the cases below.
# AdamW: applying the decay before or after the Adam update (both correct: torch does it before, the handout
# after) moves a parameter by lr^2 * wd * |p| per step, 2e-5 relative over 15 steps at lr 1e-2 and wd 0.1;
# the optimizer mutants move them by > 1e-2 relative.
RTOL = {"rope": 1e-4, "mha-rope": 1e-4, "block": 1e-4, "lm": 1e-4, "adamw": 5e-4}
RTOL_DEFAULT = 2e-5
MARGIN = 100.0   # times the float32 reference's own distance from float64

INTERFACE_TEXT = ("missing key(s) in state_dict", "unexpected key(s) in state_dict", "size mismatch for",
                  "error(s) in loading state_dict", "unexpected keyword argument", "positional argument",
                  "required positional", "takes from", "got multiple values")


def reference():
    from reference_model import lm_adapters
    return lm_adapters


def reference_files() -> dict:
    """The reference's files as lm_divergence's recorders name them (path that runs -> path shown)."""
    import reference_model.lm as ref_model
    return {ref_model.__file__: "reference_model/lm.py", reference().__file__: "reference_model/lm_adapters.py"}


def student_location(tb) -> dict | None:
    """The innermost frame of the student's files (adapters or package) in a traceback."""
    loc = None
    while tb is not None:
        shown = lm_loader.STATE.files.get(tb.tb_frame.f_code.co_filename)
        if shown:
            loc = {"file": shown, "line": tb.tb_lineno}
        tb = tb.tb_next
    return loc


def classify(exc: BaseException) -> str:
    """not-implemented | missing-module | interface | timeout | error, from the exception alone."""
    if isinstance(exc, ProbeTimeout):
        return "timeout"
    if isinstance(exc, NotImplementedError) and not raised_by_torch(exc):   # the student's own stub
        return "not-implemented"
    if isinstance(exc, ModuleNotFoundError):
        return "missing-module"
    text = f"{type(exc).__name__}: {exc}".lower()
    if isinstance(exc, KeyError) or any(t in text for t in INTERFACE_TEXT):
        return "interface"
    return "error"


class Outcome(Exception):
    """A component's run ended in an exception: carries the finished check."""

    def __init__(self, chk: dict):
        super().__init__(chk["detail"])
        self.check = chk


def call(ctx, comp: str, args: tuple, case: str):
    """Call the student's adapter; an exception becomes an Outcome with a per-component check."""
    name = ADAPTER[comp]
    fn = getattr(ctx.module, name, None)
    if fn is None:
        raise Outcome(check(f"lm-{comp}", "skip", {"status": "missing"}, "", f"{name} is not defined",
                            data={"component": comp, "kind": "absent", "adapter": name}))
    try:
        with ctx.student(f"{name}(...)", seconds=ctx.budget(30.0)):
            return _traced(ctx, comp, fn, args)
    except StudentError as e:
        if isinstance(e.exc, MemoryError):
            raise
        raise exception_outcome(comp, e.exc, case) from None


def _traced(ctx, comp: str, fn, args):
    """Call fn, remembering which of the student's functions ran (file, first line, name), in first-call order,
    and which of the student's lines ran.

    The parent locates a failing component at the first function that ran for it and for no passing one; the
    first divergence (lm_divergence) moves off lines that ran for a passing component."""
    import sys
    seen = ctx.cache.setdefault("lm_functions", {}).setdefault(comp, {})
    lines = ctx.cache.setdefault("lm_lines", {}).setdefault(comp, set())
    files = lm_loader.STATE.files
    outer = []           # the first student frame entered: the adapter
    # in ctx.cache, not a module global: the tamper guard restores the harness's modules after student code
    returned = ctx.cache.setdefault("lm_returned_at", {})

    def local(frame, event, arg):
        if event == "line" and len(lines) < 5000:
            lines.add((files.get(frame.f_code.co_filename), frame.f_lineno))
        elif event == "return" and outer and frame is outer[0]:
            # the first student frame (the adapter) returning: where a None result came from (as_plain)
            returned[comp] = {"file": files.get(frame.f_code.co_filename), "line": frame.f_lineno}
        return local

    def trace(frame, event, arg):
        if event != "call":
            return None
        co = frame.f_code
        shown = files.get(co.co_filename)
        if not shown:
            return None
        if len(seen) < 40:
            seen.setdefault((shown, co.co_firstlineno), getattr(co, "co_qualname", co.co_name))
        if not outer:
            outer.append(frame)
        return local
    old = sys.gettrace()
    returned.pop(comp, None)
    sys.settrace(trace)
    try:
        return fn(*args)
    finally:
        sys.settrace(old)


def lines_ran(ctx, comp: str) -> dict:
    """{shown file: [lines]} of the student's lines that ran for this component: the parent folds another
    component's failure into this one only when that failure starts on one of them (first divergence)."""
    out: dict = {}
    for f, line in ctx.cache.get("lm_lines", {}).get(comp, ()):
        if f:
            out.setdefault(f, []).append(line)
    return {f: sorted(v) for f, v in out.items()}


def functions_ran(ctx, comp: str) -> list:
    return [[f, line, name] for (f, line), name in ctx.cache.get("lm_functions", {}).get(comp, {}).items()]


def exception_outcome(comp: str, exc: BaseException, case: str) -> Outcome:
    """The component's check for an exception raised by the student's code (adapter or a class it returned)."""
    name = ADAPTER[comp]
    kind = classify(exc)
    msg = f"{type(exc).__name__}: {cut(exc, 400)}"
    loc = student_location(exc.__traceback__)
    relocated = interface_location(exc, lm_loader.STATE.files)   # the line to change if it is an interface problem
    called = module_called(exc, lm_loader.STATE.files)
    if called:      # a name bound to a submodule, not the class in it: the package's __init__ is the line
        kind, relocated = "interface", {"file": called["file"], "line": called["line"]}
        msg += (f" ({called['name']} is the module {called['module']}: {called['package']}'s __init__.py does "
                f"not import the class, so `from {called['package']} import {called['name']}` bound the module; "
                f"called at {called['called_at']['file']}:{called['called_at']['line']})")
    if kind == "interface":
        loc = relocated or loc
        sides = interface_sides(exc, lm_loader.STATE.files)
    data = {"component": comp, "kind": kind, "adapter": name, "case": case, "exception": type(exc).__name__,
            "message": cut(msg, 1000), "where": f"{name}(...)", "timeout": kind == "timeout"}
    if kind == "interface" and sides:
        data["sides"] = sides
    if relocated and kind == "error":       # the parent uses it if the diagnosis turns out to be the interface
        data["adapter_location"] = relocated
    if kind == "not-implemented":
        return Outcome(check(f"lm-{comp}", "skip", {"status": "not implemented"}, "",
                             f"{name} raises NotImplementedError (not implemented yet)", data=data, location=loc))
    if kind == "missing-module":
        data["missing_module"] = getattr(exc, "name", None)
        data["imports"] = [n for n in lm_loader.STATE.notes if n.get("missing_module") == data["missing_module"]][:5]
    return Outcome(check(f"lm-{comp}", "error", {"exception": type(exc).__name__, "message": cut(msg, 300)},
                         "runs without raising", f"{name} raised {cut(msg, 300)} on {case}", data=data, location=loc))


def as_plain(out, comp: str, case: str, ctx=None):
    """The student's output as a plain tensor, or an Outcome saying why it is not one."""
    name = ADAPTER[comp]
    problem = None
    if out is None:
        problem = f"{name} returned None"
    elif not isinstance(out, torch.Tensor):
        problem = f"{name} returned {type(out).__name__}, expected a tensor"
    else:
        problem = trusted.bad_tensor(out, str(out.device) if type(out) is torch.Tensor else "cpu")
    if problem:
        raise Outcome(check(f"lm-{comp}", "error", {"problem": problem}, "a plain float tensor",
                            f"{problem} on {case}", data={"component": comp, "kind": "interface",
                                                          "adapter": name, "case": case, "message": problem},
                            location=ctx.cache.get("lm_returned_at", {}).get(comp)   # the adapter's return
                            if ctx is not None else None))
    return out.detach()


def to64(x):
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.detach().double()
    if isinstance(x, dict):
        return {k: to64(v) for k, v in x.items()}
    return x


def compare(comp: str, case: str, got: torch.Tensor, ref64: torch.Tensor, ref32: torch.Tensor) -> dict:
    """One case: errors of the student's output against float64, and the tolerance it had."""
    if tuple(got.shape) != tuple(ref64.shape):
        return {"case": case, "ok": False, "shape": list(got.shape), "expected_shape": list(ref64.shape)}
    got64 = got.double()
    scale = float(ref64.abs().max()) if ref64.numel() else 0.0
    err32 = float((ref32.double() - ref64).abs().max()) if ref64.numel() else 0.0
    tol = MARGIN * err32 + RTOL.get(comp, RTOL_DEFAULT) * max(scale, 1e-3)
    diff = (got64 - ref64).abs()
    finite = bool(torch.isfinite(got64).all())
    max_abs = float(diff.max()) if diff.numel() else 0.0
    return {"case": case, "ok": finite and max_abs <= tol, "finite": finite,
            "max_abs": rnd(max_abs, 9) if finite else None, "max_rel": rnd(max_abs / max(scale, 1e-12), 9)
            if finite else None, "tol": rnd(tol, 9), "scale": rnd(scale, 6)}


def verdict(comp: str, rows: list[dict], what: str) -> dict:
    """The component's check from its cases: fail on the worst case, pass when all are within tolerance."""
    bad = [r for r in rows if not r["ok"]]
    name = ADAPTER[comp]
    data = {"component": comp, "adapter": name, "cases": rows}
    if not bad:
        worst = max(rows, key=lambda r: (r.get("max_rel") or 0))
        return check(f"lm-{comp}", "pass", {"max_abs": worst.get("max_abs"), "max_rel": worst.get("max_rel")},
                     "within tolerance of the reference on every case",
                     f"{len(rows)} cases ({what}); worst relative error {worst.get('max_rel')}", data=data)
    r = bad[0]
    data.update(kind="mismatch", case=r["case"])
    if "shape" in r:
        detail = f"returned shape {r['shape']}, expected {r['expected_shape']} on {r['case']}"
        data["kind"] = "shape"
        return check(f"lm-{comp}", "fail", {"shape": r["shape"]}, f"shape {r['expected_shape']}", detail,
                     data=data)
    if not r["finite"]:
        detail = f"NaN or infinite outputs on {r['case']}"
        return check(f"lm-{comp}", "fail", {"finite": False}, "finite outputs", detail, data=data)
    detail = (f"{len(bad)} of {len(rows)} cases differ from the reference; first: {r['case']}: max abs error "
              f"{r['max_abs']:.3g}, relative {r['max_rel']:.3g} (tolerance {r['tol']:.2g})")
    return check(f"lm-{comp}", "fail", {"max_abs": r["max_abs"], "max_rel": r["max_rel"]},
                 f"max abs error <= {r['tol']:.2g}", detail, data=data)


def run_cases(ctx, comp: str, cases, what: str, redraw=None, fingerprint=None) -> list[dict]:
    """cases: [(description, args builder)] where builder() -> args tuple (float32 tensors, fresh each call);
    redraw(seed) -> such cases for another draw: a failing component is then fingerprinted against the mutants."""
    ref = getattr(reference(), ADAPTER[comp])
    rows = []
    course = [(desc, build) for desc, build in cases if not beyond_course(desc)]
    try:
        for desc, build in course:
            rows.append(_one_case(ctx, comp, ref, desc, build))
    except Outcome as o:
        if (o.check.get("data") or {}).get("kind") == "error" and redraw is not None \
                and fingerprint is not None:      # a bug that raises on some inputs: a known bug's exception?
            attach(o.check, fingerprint(ctx, comp, redraw))
        o.check.setdefault("data", {})["lines"] = lines_ran(ctx, comp)
        _argument_order(ctx, comp, o.check)
        if (o.check.get("data") or {}).get("kind") == "error":
            locate_crash(ctx, comp, o.check, dict(course).get(o.check["data"].get("case")))
        return [o.check]
    c = verdict(comp, rows, what)
    c["data"]["functions"] = functions_ran(ctx, comp)
    notes = _robustness(ctx, comp, ref, [(d, b) for d, b in cases if beyond_course(d)])
    if notes:
        c["data"]["robustness"] = notes
    if c["status"] == "pass":        # these lines are right: a divergence on one is located at its caller
        ctx.cache.setdefault("lm_passing_lines", set()).update(ctx.cache.get("lm_lines", {}).get(comp, ()))
    elif c["status"] == "fail":
        c["data"]["lines"] = lines_ran(ctx, comp)
        _argument_order(ctx, comp, c)
        bad = next((r for r in rows if not r["ok"]), None)
        locate(ctx, comp, c, dict(cases).get(bad["case"]) if bad else None, bad)
    if c["status"] == "fail" and redraw is not None and fingerprint is not None:
        attach(c, fingerprint(ctx, comp, redraw))    # passed in by the caller: lm_fingerprint imports this module
    return [c]


# Inputs the adapter's signature allows but the course never passes (2-D input into Linear or RMSNorm, SDPA
# without a mask, 1-D positions into attention with RoPE): a failure there is a robustness note (severity
# info), never the component's failure. Their descriptions end with this marker.
BEYOND = " (beyond the course's inputs)"


def beyond_course(desc: str) -> bool:
    return desc.endswith(BEYOND)


def _one_case(ctx, comp, ref, desc, build) -> dict:
    got = as_plain(call(ctx, comp, build(), desc), comp, desc, ctx)
    with torch.no_grad():
        ref64 = ref(*[to64(a) for a in build()]).detach()
        ref32 = ref(*build()).detach()
    return compare(comp, desc, got, ref64, ref32)


def _robustness(ctx, comp, ref, cases) -> list[dict]:
    """The cases beyond the course's inputs that raise or differ: [{case, problem, location}]."""
    out = []
    for desc, build in cases:
        try:
            row = _one_case(ctx, comp, ref, desc, build)
        except Outcome as o:
            out.append({"case": desc, "problem": cut(o.check.get("detail", ""), 300),
                        "location": o.check.get("location")})
            continue
        if not row["ok"]:
            problem = (f"returned shape {row['shape']}, expected {row['expected_shape']}" if "shape" in row else
                       "NaN or infinite outputs" if not row.get("finite") else
                       f"max abs error {row['max_abs']:.3g}, relative {row['max_rel']:.3g}")
            out.append({"case": desc, "problem": problem, "location": None})
    return out


def locate(ctx, comp: str, c: dict, build, row: dict | None):
    """The check's location: the first op of the student's whose value the reference never computes on the
    failing case (probes/lm_divergence.py); nothing when it cannot be told."""
    from . import divergence as div
    if build is None or "shape" in (row or {}):
        return
    ref_files = reference_files()
    try:
        args = build()
        with ctx.student(f"{ADAPTER[comp]} (first divergence)", seconds=ctx.budget(10.0)):
            mine, result = div.record(dict(lm_loader.STATE.files), getattr(ctx.module, ADAPTER[comp]), args)
        theirs, expected = div.record(ref_files, getattr(reference(), ADAPTER[comp]), build())
        inputs = div.inputs_of(args)
        rtol = min(1e-4, float(row.get("max_rel") or 1.0) / 10) if row else 1e-4
        found = div.first_divergence(mine, result, theirs, inputs, rtol,
                                     frozenset(ctx.cache.get("lm_passing_lines", ())), expected)
    except Exception:                # noqa: BLE001 - locating is extra evidence; it never breaks the check
        return
    if found:
        c["data"]["divergence"] = found
        c["location"] = {"file": found["file"], "line": found["line"]}


def _argument_order(ctx, comp: str, c: dict):
    """A failing component whose adapter passes arguments into other parameters' slots (lm_where)."""
    from .where import argument_order
    try:
        found = argument_order(getattr(ctx.module, ADAPTER[comp], None), lm_loader.STATE.files)
    except Exception:                # noqa: BLE001 - reading the adapter is extra evidence
        return
    if found:
        c.setdefault("data", {})["argument_order"] = found


def locate_crash(ctx, comp: str, c: dict, build):
    """A crash on a value of the wrong shape or dtype: the line that made that value (probes/lm_where.py's
    crash_origin), the raising line kept as context. Nothing when it cannot be told."""
    from . import divergence as div
    from .where import SHAPE_TEXT, crash_origin
    msg = str((c.get("data") or {}).get("message", "")).lower()
    if build is None or not any(t in msg for t in SHAPE_TEXT):
        return
    try:
        with ctx.student(f"{ADAPTER[comp]} (where the value was made)", seconds=ctx.budget(10.0)):
            rec, _ = div.record(dict(lm_loader.STATE.files), getattr(ctx.module, ADAPTER[comp]), build())
        found = crash_origin(rec.failed, rec.ops)
    except Exception:                # noqa: BLE001 - locating is extra evidence; it never breaks the check
        return
    if found:
        c["data"]["made_at"] = found
        c["data"]["raised_at"] = c.get("location")
        c["location"] = {"file": found["file"], "line": found["line"]}
        c["detail"] += (f"; the {found['op']} at {found['file']}:{found['line']} made the value of shape "
                        f"{found['shape']} that {found['raised_at']['op']} raised on")


def attach(c: dict, fp: dict | None):
    """Put a fingerprint (the known bug the outputs equal) on a failing check."""
    if fp:
        c["data"]["fingerprint"] = fp
        c["detail"] += f"; equals the reference with '{fp['summary']}' to {fp['max_abs']:.1g} on {fp['draws']} draws"


def gen(seed: int, k: int) -> torch.Generator:
    """A seeded generator per case: the same inputs for every submission at the same --seed."""
    return torch.Generator().manual_seed(seed * 1000 + k)
