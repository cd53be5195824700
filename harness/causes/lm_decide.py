"""One `lm` component's diagnosis, decided from measurements: which evidence names which cause, at what
confidence, in which order. Torch-free; the parent's engine runs it on what the sandboxed child measured.

The child (harness/child/probes/lm/diag/diagnose.py `measure_component`) measures a failing component's adapter and sends
the numbers, never a cause: the first disagreement with the reference (`err`), the interface findings with
the stage that found each (`interface`), the lm mutant whose outputs the adapter reproduces (`fingerprint`),
the properties (`properties`, each with the cause a failure would name as declared data), and the stages it
could not measure (`not_measured`). Here, strongest evidence first:
  1. interface, seen directly: returned None, the exception's keys/shapes/arguments, an integer output dtype,
     a bias (nonzero output at zero input) -> `interface-mismatch`;
  2. fingerprint: the outputs equal one known mutant's on every draw -> its cause, 0.95 (0.6 when the
     mutants that match name different causes);
  3. interface again: the outputs equal the reference's with two arguments exchanged;
  4. properties: the failed property with a cause and the highest confidence;
  5. otherwise the measured disagreement, with no cause.
A stage the child could not measure stops the cascade there with no cause: a rule never fires on a
measurement that was not made, and a later stage is not read as if the earlier one had found nothing.

`validate` checks what the child sent (types, bounds, known ids: a cause or mutant id the parent does not
know is not trusted); `decide` returns the diagnosis dict of harness.child.probes.lm.diag (component, adapter, status,
cause, confidence, evidence, errors, properties); `annotate` replaces a check's data with the validated
measurements and the parent's decision. The pytest plugin, lmdiag's rubric and the benches get the same
decision through lmdiag.diagnose.diagnose_component (measure, then this `decide`).
"""
from __future__ import annotations

import math

from ..readable import cut
from ..lm_table import ADAPTER as _TABLE, DEPS, registry_name
from ..lm_property_causes import PROPERTY_CAUSES

ADAPTER = {registry_name(c): a for c, a in _TABLE.items()}     # lmdiag's spelling (mha_rope)
_DEPS = {registry_name(c): tuple(map(registry_name, d)) for c, d in DEPS.items()}
INTERFACE = "interface-mismatch"
FINGERPRINT_CONFIDENCE = 0.95        # symptom and mechanism both observed on every draw
FINGERPRINT_AMBIGUOUS = 0.6          # the mutants that match name different causes
INTERFACE_STAGES = ("output", "exception", "dtype", "zero-input")     # before the fingerprint, in this order
STAGES = INTERFACE_STAGES + ("fingerprint", "swapped", "properties")
INTERFACE_KINDS = {"returned-none", "state-dict-keys", "shapes", "swapped-arguments", "key-lookup", "integer-dtype",
                   "state-dict", "arguments", "dtype", "bias"}
# (stage, kind) -> confidence; every other interface finding 0.9. A size equal to a scalar argument (theta,
# eps) is a reading of an error message, weaker than the reference reproduced with the arguments exchanged.
INTERFACE_CONFIDENCE = {("output", "returned-none"): 0.95, ("exception", "swapped-arguments"): 0.85}
INTERFACE_DEFAULT = 0.9
NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _mutants() -> dict:
    try:
        from mutants.lm_registry import LM_MUTANTS
    except ImportError:        # an installation without the mutant library: no fingerprint is trusted
        return {}
    return {m.id: m for m in LM_MUTANTS}


MUTANTS = _mutants()


def known_causes() -> set[str]:
    """Every cause id an lm component diagnosis may name."""
    return {m.cause for m in MUTANTS.values()} | set(PROPERTY_CAUSES) | {INTERFACE}


KNOWN = known_causes()


# ----------------------------------------------------------------------------- validation

def _is(v, table) -> bool:
    """v is one of the table's ids (a list or dict from the child is no id, and not hashable either)."""
    return isinstance(v, str) and v in table


def _num(v):
    """A number as JSON carries it (non-finite ones as the strings jsonable writes), or None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return v
    return v if isinstance(v, str) and v in NON_FINITE else None


def _plain(v, depth=0):
    """A measured or expected value: scalars, strings and short lists of them."""
    if v is None or isinstance(v, (bool, int, float)):
        return v
    if isinstance(v, str):
        return cut(v, 300)
    if isinstance(v, list) and depth < 3:
        return [_plain(x, depth + 1) for x in v[:32]]
    return None


def _texts(v, n=8, size=1000) -> list[str]:
    return [cut(x, size) for x in v[:n] if isinstance(x, str)] if isinstance(v, list) else []


def _shape(v):
    if not isinstance(v, list):
        return None
    return [[int(n) for n in s[:8] if isinstance(n, int) and not isinstance(n, bool)] for s in v[:8]
            if isinstance(s, list)]


def _err(e):
    if not isinstance(e, dict) or not isinstance(e.get("case"), str):
        return None
    out = {"case": e["case"][:300], "draw": e["draw"] if isinstance(e.get("draw"), int) else 0}
    if "raised" in e:
        return dict(out, raised=cut(e["raised"], 400))
    out = dict(out, max_abs=_num(e.get("max_abs")), max_rel=_num(e.get("max_rel")), shape=_shape(e.get("shape")),
               expected_shape=_shape(e.get("expected_shape")))
    if out["shape"] == out["expected_shape"] and (out["max_abs"] is None or out["max_rel"] is None):
        return None              # a disagreement of the same shape with no size: nothing to report it by
    return out


def _interface(f):
    if not isinstance(f, dict) or not _is(f.get("stage"), INTERFACE_STAGES + ("swapped",)) or \
            not _is(f.get("kind"), INTERFACE_KINDS):
        return None
    return {"stage": f["stage"], "kind": f["kind"], "evidence": _texts(f.get("evidence"))}


def _built_from(comp: str) -> set[str]:
    """The component and every component it is built from."""
    out, todo = set(), [comp]
    while todo:
        c = todo.pop()
        if c not in out:
            out.add(c)
            todo.extend(_DEPS.get(c, ()))
    return out


def _fingerprint(fp, comp):
    """A match with a mutant of the component or of one it is built from (any other cannot explain it)."""
    if not isinstance(fp, dict) or not _is(fp.get("mutant"), MUTANTS) or \
            MUTANTS[fp["mutant"]].component not in _built_from(comp):
        return None
    diff, draws, cases = _num(fp.get("max_diff")), fp.get("draws"), fp.get("cases")
    if not isinstance(diff, (int, float)) or not 0 <= diff < math.inf or not isinstance(draws, int) or \
            not isinstance(cases, int) or not (0 < draws <= 100 and 0 < cases <= 100):
        return None
    built = _built_from(comp)
    also = [a for a in fp["also"][:20] if _is(a, MUTANTS) and MUTANTS[a].component in built] \
        if isinstance(fp.get("also"), list) else []
    return {"mutant": fp["mutant"], "mutant_component": MUTANTS[fp["mutant"]].component, "max_diff": diff,
            "draws": draws, "cases": cases, "also": also}


def _property(p):
    if not isinstance(p, dict) or not isinstance(p.get("id"), str) or not isinstance(p.get("passed"), bool):
        return None
    conf = p.get("confidence")
    conf = float(conf) if isinstance(conf, (int, float)) and not isinstance(conf, bool) and 0 <= conf <= 1 else 0.0
    cause = p["cause"] if _is(p.get("cause"), KNOWN) and not p["passed"] else None    # an unknown id: not trusted
    return {"id": p["id"][:100], "component": cut(p.get("component", ""), 40), "what": cut(p.get("what", ""), 300),
            "measured": _plain(p.get("measured")), "expected": _plain(p.get("expected")), "passed": p["passed"],
            "cause": cause, "confidence": 0.0 if p["passed"] else conf}


def validate(m) -> dict | None:
    """The child's measurements of one component, type-checked and bounded; None when unusable."""
    if not isinstance(m, dict) or not _is(m.get("component"), ADAPTER) or \
            not _is(m.get("status"), ("pass", "fail", "not-implemented")):
        return None
    comp = m["component"]
    out = {"component": comp, "adapter": ADAPTER[comp], "status": m["status"],
           "draws": m["draws"] if isinstance(m.get("draws"), int) and 0 < m["draws"] <= 100 else 2}
    if isinstance(m.get("internal_error"), str):
        return dict(out, status="fail", internal_error=m["internal_error"][:300])
    if m["status"] != "fail":
        return dict(out, why=m["why"] if _is(m.get("why"), ("not-defined", "raises")) else "raises")
    err = _err(m.get("err"))
    if err is None:
        return None
    nm = m.get("not_measured") if isinstance(m.get("not_measured"), dict) else {}
    return dict(out, err=err,
                interface=[f for f in map(_interface, m["interface"][:8]) if f]
                if isinstance(m.get("interface"), list) else [],
                fingerprint=_fingerprint(m.get("fingerprint"), comp),
                properties=[p for p in map(_property, m["properties"][:60]) if p]
                if isinstance(m.get("properties"), list) else [],
                not_measured={k: cut(v, 300) for k, v in nm.items() if k in STAGES})


# ----------------------------------------------------------------------------- the decision

def _show(v, top=True) -> str:
    """A measured value as Python printed it in the child (non-finite numbers arrive as strings)."""
    if isinstance(v, list):
        return "[" + ", ".join(_show(x, False) for x in v) + "]"
    if isinstance(v, str):
        return v if top or v in NON_FINITE else repr(v)
    return str(v) if top else repr(v)


def error_line(err) -> str:
    """The first disagreement, as a line of evidence."""
    if err is None:
        return ""
    if "raised" in err:
        return f"{err['case']}: {err['raised']}"
    if err["shape"] != err["expected_shape"]:
        return f"{err['case']}: output shape {err['shape']}, expected {err['expected_shape']}"
    a, r = (NON_FINITE.get(x, x) if isinstance(x, str) else x for x in (err["max_abs"], err["max_rel"]))
    return f"{err['case']}: max abs error {a:.3g}, relative {r:.3g} against the reference"


def result(m, status, cause=None, confidence=0.0, evidence=(), errors=None, props=(), **extra) -> dict:
    """A diagnosis: {component, adapter, status, cause, confidence, evidence, errors, properties, ...}."""
    return {"component": m["component"], "adapter": ADAPTER[m["component"]], "status": status, "cause": cause,
            "confidence": round(float(confidence), 3), "evidence": [str(e) for e in evidence], "errors": errors,
            "properties": list(props), **extra}


def _internal(m, why) -> dict:
    return result(m, "fail", None, 0.0, [f"mtxdiag could not finish this component's diagnosis: {why}"],
                  internal_error=True)


def fingerprint_finding(comp: str, fp: dict | None) -> dict | None:
    """What a fingerprint match names: {cause, mutant, mutant_component, confidence, evidence, max_diff, draws,
    also}; None for no match (or a mutant this installation does not know)."""
    if not fp or fp.get("mutant") not in MUTANTS:
        return None
    best = MUTANTS[fp["mutant"]]
    hits = [best] + [MUTANTS[a] for a in fp.get("also") or () if a in MUTANTS]
    causes = {h.cause for h in hits}
    where = "" if best.component == comp else f" (a bug in {best.component}, which {comp} is built from)"
    evidence = [f"equals the reference with the edit '{best.summary}'{where} to {fp['max_diff']:.1g} "
                f"on {fp['draws']} draws of {fp['cases']} case(s) each; the reference differs"]
    if len(causes) > 1:
        evidence.append("also matches: " + "; ".join(f"{h.id} ({h.cause})" for h in hits[1:]))
    return {"cause": best.cause, "mutant": best.id, "mutant_component": best.component,
            "confidence": FINGERPRINT_CONFIDENCE if len(causes) == 1 else FINGERPRINT_AMBIGUOUS,
            "evidence": evidence, "max_diff": fp["max_diff"], "draws": fp["draws"], "also": [h.id for h in hits[1:]]}


def interface_confidence(stage: str, kind: str) -> float:
    return INTERFACE_CONFIDENCE.get((stage, kind), INTERFACE_DEFAULT)


def decide(m: dict) -> dict:
    """The diagnosis of one component from its (validated) measurements; see the module docstring."""
    if m.get("internal_error"):
        return _internal(m, m["internal_error"])
    adapter = ADAPTER[m["component"]]
    if m["status"] == "pass":
        return result(m, "pass", evidence=[f"agrees with the reference on {m['draws']} draws of every case"])
    if m["status"] == "not-implemented":
        return result(m, "not-implemented", evidence=[f"{adapter} is not defined" if m.get("why") == "not-defined"
                                                      else f"{adapter} raises NotImplementedError"])
    err, nm = m["err"], m.get("not_measured") or {}
    where = error_line(err)
    found = {}
    for f in m.get("interface") or ():
        found.setdefault(f["stage"], f)

    def interface(f):
        return result(m, "fail", INTERFACE, interface_confidence(f["stage"], f["kind"]), f["evidence"] + [where], err,
                      interface=f["kind"])
    for stage in INTERFACE_STAGES:                     # 1. interface problems seen directly
        if stage in found:
            return interface(found[stage])
        if stage in nm:
            return _internal(m, nm[stage])
    if "fingerprint" in nm:                            # 2. a known bug's exact numbers
        return _internal(m, nm["fingerprint"])
    fp = fingerprint_finding(m["component"], m.get("fingerprint"))
    if fp:
        return result(m, "fail", fp["cause"], fp["confidence"], fp["evidence"] + [where], err,
                      mutant=fp["mutant"], mutant_component=fp["mutant_component"])
    if "swapped" in found:                             # 3. the reference with two arguments exchanged
        return interface(found["swapped"])
    for stage in ("swapped", "properties"):
        if stage in nm:
            return _internal(m, nm[stage])
    props = m.get("properties") or []                  # 4. properties
    failed = sorted((p for p in props if not p["passed"]), key=lambda p: -p["confidence"] if p["cause"] else 1)
    lines = [f"{p['id']}: measured {_show(p['measured'])}, expected {_show(p['expected'])} ({p['what']})"
             for p in failed]
    named = [p for p in failed if p["cause"]]
    if named:
        return result(m, "fail", named[0]["cause"], named[0]["confidence"], lines + [where], err, props)
    if "raised" in err:                                # 5. honest: measured, no cause
        return result(m, "fail", None, 0.0, lines + [f"raised on {where}; no known cause matches"], err, props)
    return result(m, "fail", None, 0.0, lines + [f"disagrees with the reference on {where}; no known cause matches"],
                  err, props)


def upstream_causes(comp: str) -> set[str]:
    """The causes of the mutants of every component comp is built from (not comp's own)."""
    below = _built_from(comp) - {comp}
    return {m.cause for m in MUTANTS.values() if m.component in below}


def own_cause(m: dict, shared=frozenset()) -> bool:
    """The decision on these (validated) measurements names a cause from evidence about the component's own
    code: a fingerprint of one of its own mutants, or a cause that nothing it is built from can produce (nor
    one of `shared`, which properties name on several components). An interface finding of a component built
    from others is not its own: the exception may come from the part it is built from."""
    r = decide(m)
    if not r["cause"] or r.get("internal_error"):
        return False
    if r.get("mutant_component"):
        return r["mutant_component"] == m["component"]
    if not _DEPS.get(m["component"]):
        return True
    return r["cause"] not in upstream_causes(m["component"]) and r["cause"] not in shared


def course_replay(v) -> dict | None:
    """The child's replay of a failing component on the course's inputs (child/probes/lm/diag/course.py):
    {visible, test, case, problem | max_abs and tolerance}, type-checked and bounded; None when unusable."""
    if not isinstance(v, dict) or not isinstance(v.get("visible"), bool):
        return None
    out: dict = {"visible": v["visible"]}
    for key, size in (("test", 80), ("case", 200), ("problem", 300)):
        if isinstance(v.get(key), str):
            out[key] = cut(v[key], size)
    for key in ("max_abs", "tolerance"):
        n = v.get(key)
        if isinstance(n, (int, float)) and not isinstance(n, bool) and math.isfinite(n):
            out[key] = float(n)
    return out


def annotate(data: dict) -> None:
    """A check's data as the parent keeps it: what the child may have called a decision (`lmdiag`) is dropped;
    its measurements (`lmdiag_measured`) are validated (dropped when unusable) and the parent's decision, when
    it names a cause, is written at `lmdiag` ({cause, confidence, evidence}, as in schema 1); the replay on the
    course's inputs (`course_replay`) is validated (dropped when unusable)."""
    data.pop("lmdiag", None)
    if "course_replay" in data:
        replay = course_replay(data.pop("course_replay"))
        if replay is not None:
            data["course_replay"] = replay
    if "lmdiag_measured" not in data:
        return
    m = validate(data.pop("lmdiag_measured"))
    if m is None:
        return
    data["lmdiag_measured"] = m
    r = decide(m)
    if r["cause"] and not r.get("internal_error"):
        data["lmdiag"] = {"cause": r["cause"], "confidence": r["confidence"],
                          "evidence": [e[:400] for e in r["evidence"][:4]]}
