"""The probes of a pack's assignment: its contract, then each binding's role probes, then the pack's own (a
one-file pack's: only its own, in their order).

Child side. The plan is built per run from the pack (harness/packs/api.py) and the edition the loader found
(child/pack_loader.py): for each binding of that edition, the generic probes of its role
(harness/child/probes/roles/ ROLE_PROBES, each called with a RoleContext: the student's object, the reference's,
the seed, the device, --quick and the student's file texts) under the check id "<component>.<probe id>". A
binding that declares how the course's own checks call it (`Binding.course`) gets one more, `<component>.course`
(roles/course.py: would those checks pass?). A binding whose piece is absent or not implemented gets its probes skipped with that reason
(data.kind "absent" / "not-implemented", as lm's components), never a crash.
"""
from __future__ import annotations

import importlib

from ...packs.discover import load as load_target
from ..pack_loader import KEY
from .base import NotRun, Skip, check

ROLES_MODULE = "harness.child.probes.roles"


def record(ctx) -> dict:
    rec = getattr(ctx.module, KEY, None)
    if not isinstance(rec, dict):
        raise Skip("the submission was not loaded as a pack's folder")
    return rec


def contract(ctx):
    """Which of the edition's pieces the submission defines: each present, absent (why) or not implemented."""
    rec = record(ctx)
    pack, edition = rec["pack"], rec["edition"]
    comps = {}
    for b in pack.bindings_for(edition):
        why = rec["absent"].get(b.component) or rec["not_implemented"].get(b.component)
        comps[b.component] = {"status": "absent" if b.component in rec["absent"] else
                              "not-implemented" if why else "present", "why": why or "", "role": b.role,
                              "target": b.target, "location": rec.get("stub_at", {}).get(b.component)}
    present = [c for c, v in comps.items() if v["status"] == "present"]
    missing = [c for c, v in comps.items() if v["status"] == "absent"]
    stubs = [c for c, v in comps.items() if v["status"] == "not-implemented"]
    expected = f"defines {', '.join(comps)}" + (f" (edition {edition})" if edition else "")
    if comps and not present and not stubs:
        return [check("contract", "fail", {"missing": missing, "absent_optional": [], "absent": missing,
                                           "not_implemented": []}, expected,
                      "none of the assignment's pieces is defined: " + "; ".join(
                          f"{c}: {comps[c]['why']}" for c in missing[:4]),
                      data={"pack": pack.name, "edition": edition, "components": comps})]
    detail = "every piece defined" if not (missing or stubs) else "; ".join(
        [f"absent (its checks are skipped): {', '.join(missing)}"] * bool(missing)
        + [f"not implemented yet: {', '.join(stubs)}"] * bool(stubs))
    return [check("contract", "pass", {"missing": [], "absent_optional": missing, "absent": missing,
                                       "not_implemented": stubs}, expected, detail,
                  data={"pack": pack.name, "edition": edition, "components": comps})]


def role_probes() -> tuple[dict, str]:
    """ROLE_PROBES (role -> its probes) and "" or {} and why there are none (the module is not installed)."""
    try:
        roles = importlib.import_module(ROLES_MODULE)
    except ModuleNotFoundError as e:
        if e.name and ROLES_MODULE.startswith(e.name):
            return {}, f"no generic role probes are installed ({ROLES_MODULE} is missing)"
        raise
    return getattr(roles, "ROLE_PROBES", {}), ""


def _course_probe():
    """The replay of the course's own calls of a binding that declares them (Binding.course; roles/course.py)."""
    roles = importlib.import_module(ROLES_MODULE)
    course = importlib.import_module(ROLES_MODULE + ".course")
    return roles.RoleProbe(course.PID, course.replay, "quick")


def _reference(pack, binding):
    if not pack.reference:
        return None
    from ..pack_loader import resolve_in
    return resolve_in(pack.reference, binding.target.partition(":")[2])


def role_probe(binding, rp, pack):
    """One role probe of one binding as a probe function of the run (fn(ctx) -> checks)."""
    cid = f"{binding.component}.{rp.id}"

    def fn(ctx):
        rec = record(ctx)
        unbuilt = _unbuilt(rec, binding, cid)
        if unbuilt:
            return unbuilt
        if ctx.quick and rp.cost == "train":
            raise NotRun("a training probe: not run under --quick")
        roles = importlib.import_module(ROLES_MODULE)
        rctx = roles.RoleContext(binding=binding, student=rec["objects"][binding.component],
                                 reference=_reference(pack, binding), seed=ctx.seed, device=ctx.device,
                                 quick=ctx.quick, source=dict(rec["texts"]))
        out = rp.fn(rctx)
        for c in out if isinstance(out, list) else []:
            if isinstance(c, dict):
                c.setdefault("data", {}).setdefault("component", binding.component)
        return out
    return cid, fn


def plan(pack, edition: str | None, quick: bool, probe_type) -> list:
    """The run's probes for a pack (probe_type: probes/__init__.Probe): contract, each binding's role probes,
    the pack's own (`Pack.probes`: "module:NAME" of probes with id, fn(ctx), cost, perhaps side). A one-file pack
    (Pack.submission "file") or a repository pack binds nothing: its own probes are all of them, its contract among
    them."""
    name = pack.name
    out = [] if not pack.is_folder else [probe_type("contract", contract, (name,), "static")]
    roles, why = role_probes() if pack.bindings else ({}, "")
    for b in pack.bindings_for(edition):
        probes = roles.get(b.role, ())
        if not probes:
            reason = why or f"no generic probe covers the role {b.role!r} yet"
            out.append(probe_type(f"{b.component}.role", _skipped(b, reason), (name,), "static"))
        for rp in probes + ((_course_probe(),) if probes and b.course is not None else ()):
            cid, fn = role_probe(b, rp, pack)
            out.append(probe_type(cid, fn, (name,), rp.cost))
    if pack.probes:
        for p in load_target(pack.probes):
            out.append(probe_type(p.id, p.fn, (name,), getattr(p, "cost", "quick"), bool(getattr(p, "side", False))))
    return [p for p in out if not (quick and p.cost == "train")]


def _unbuilt(rec: dict, binding, cid: str) -> list:
    """The skip of a check on a piece the submission lacks or has not written yet ([] when it is there)."""
    why = rec["absent"].get(binding.component) or rec["not_implemented"].get(binding.component)
    if not why:
        return []
    kind = "absent" if binding.component in rec["absent"] else "not-implemented"
    return [check(cid, "skip", None, "", why, data={"kind": kind, "component": binding.component})]


def _skipped(binding, reason: str):
    """A binding whose role no probe covers: could not be measured (unless the piece is not there at all)."""
    cid = f"{binding.component}.role"

    def fn(ctx):
        return _unbuilt(record(ctx), binding, cid) or [
            check(cid, "skip", None, "", reason, data={"could_not_measure": reason, "component": binding.component})]
    return fn
