"""Parent side: validate what the child sent, turn checks into ranked causes, decide the verdict.

Nothing here trusts the child: every field is type-checked and bounded
before a rule reads it, and diagnoses and scores are computed only here.
"""
from __future__ import annotations

import json
import math
from dataclasses import replace

from . import __version__, reached, reference_curves
from .assignments import DEFAULT, assignment_of, pack_of
from .causes import BY_ID, RULES
from .causes import lm_decide
from .causes.base import RANDOMNESS_EVIDENCE, Evidence, say
from .causes.lm_rank import order as lm_order
from .checks import DECLARED, component_of
from .limits import RESULT_MB
from .readable import cut
from .outcome import ChildOutcome, stack_line
from .packs import course
from .protocol import ASSIGNMENTS, SCHEMA, STATUSES, Check, Diagnosis, Result


KEY_MAX = 4096      # the longest key of the child's data kept (Linux's PATH_MAX): a longer one is dropped


class InvalidResult(ValueError):
    pass


def _clean(v, depth=0):
    """JSON-safe, bounded copy of untrusted data (no NaN, no huge strings, limited depth)."""
    if depth > 8:
        return None
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v if abs(v) < 2 ** 63 else None
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, str):
        return cut(v, 4000)
    if isinstance(v, list):
        return [_clean(x, depth + 1) for x in v[:5000]]
    if isinstance(v, dict):
        # a key is kept whole or dropped, never cut: keys name files (a component's lines ran, by path), and a
        # cut path matches nothing (a repository under a long folder lost its folds)
        return {k: _clean(x, depth + 1) for k, x in list(v.items())[:200] if isinstance(k, str) and len(k) <= KEY_MAX}
    return None


def validate_payload(p) -> dict:
    if not isinstance(p, dict):
        raise InvalidResult("the child's result is not an object")
    checks = []
    for c in p.get("checks", [])[:200] if isinstance(p.get("checks"), list) else []:
        if not isinstance(c, dict) or not isinstance(c.get("id"), str) or c.get("status") not in STATUSES:
            raise InvalidResult(f"malformed check: {cut(c, 200)}")
        loc = c.get("location")
        if loc is not None and not (isinstance(loc, dict) and isinstance(loc.get("line"), int)):
            loc = None
        data = _clean(c.get("data")) if isinstance(c.get("data"), dict) else {}
        lm_decide.annotate(data)     # lm: the child's measurements validated, the decision the parent's own
        checks.append(Check(id=c["id"][:64], status=c["status"], measured=_clean(c.get("measured")),
                            expected=cut(c.get("expected", ""), 300), detail=cut(c.get("detail", ""), 2000),
                            data=data, location=_clean(loc)).to_json())
    load = p.get("load") if isinstance(p.get("load"), dict) else {"ok": False}
    skipped = [s for s in p.get("skipped_code", []) if isinstance(s, dict)][:500] \
        if isinstance(p.get("skipped_code"), list) else []
    timings = {k: v for k, v in (p.get("timings") or {}).items()
               if isinstance(k, str) and isinstance(v, (int, float)) and math.isfinite(v)} \
        if isinstance(p.get("timings"), dict) else {}
    return {"checks": checks, "load": _clean(load), "skipped_code": _clean(skipped),
            "artifacts": _clean(p.get("artifacts")) if isinstance(p.get("artifacts"), dict) else {},
            "stdout": str(p.get("stdout", ""))[:200_000], "timings": timings,
            "assignment": p.get("assignment") if p.get("assignment") in ASSIGNMENTS else None,
            "coverage": reached.clean(p.get("coverage"))}


def _diag(cause_id, confidence, evidence, location=None, fix=None, title=None):
    c = BY_ID[cause_id]
    return Diagnosis(id=c.id, title=title or c.title, confidence=round(float(confidence), 2),
                     evidence=[str(e) for e in evidence], fix=fix or c.fix, location=location, why=c.why,
                     severity=c.severity).to_json()


def _component(check_id: str) -> str | None:
    """The contract component a check (or a probe's error, reported under the probe id) calls directly."""
    comps = {c.component for c in DECLARED.get(check_id, ())} - {None}
    return component_of(check_id) or (sorted(comps)[0] if comps else None)


def _observed(c: dict) -> list[str]:
    """What a probe saw about how its property broke: the first divergence, the mechanism."""
    d = c.get("data") or {}
    out = []
    for key in ("divergence", "mechanism"):
        v = d.get(key)
        if isinstance(v, dict) and v.get("text"):
            out.append(f"{key}: {v['text']}")
    return out


def _unexplained(c: dict) -> dict:
    """The catch-all: the measured failure and where it starts, never a guessed cause (confidence < 0.5)."""
    d = c.get("data") or {}
    div = d.get("divergence") if isinstance(d.get("divergence"), dict) else {}
    loc = c.get("location") or ({"file": None, "line": div["line"]} if div.get("line") else None)
    if d.get("could_not_measure"):
        title = f"{c['id']} could not be measured: {d['could_not_measure']}"
    else:
        title = f"{c['id']} failed; no catalogued cause matches what was observed"
    return _diag("unexplained-failure", 0.45 if div else 0.3, [say(c)] + _observed(c), loc, title=title)


def diagnose(result: dict) -> list[dict]:
    """Rules -> findings; one diagnosis per root cause, most likely first; unexplained failures last."""
    ev = Evidence(result)
    found, explained = [], set()
    for rule in RULES:
        if ev.assignment not in rule.CAUSE.assignments:
            continue
        f = rule.diagnose(ev)
        if f is None:
            continue
        for one in (f if isinstance(f, list) else [f]):   # lm's rules find one per component
            found.append((one, getattr(one, "cause", None) or rule.CAUSE))
    found.sort(key=lambda fc: -fc[0].confidence)
    out = []
    pack = pack_of(ev.assignment)     # a folder pack's diagnoses fold by cited checks; a one-file or repository
    packed = pack is not None and pack.is_folder    # pack's (reversal, block, lm) keep their own rules' behaviour
    for f, cause in found:
        cited = {cid for cid in ev.by_id for line in f.evidence if line.startswith(cid + ":")}
        if packed and cited and cited <= explained:
            continue        # a pack's: every check it cites a stronger diagnosis already accounts for (folded there)
        evidence = list(f.evidence)
        for cid in f.explains:  # fold this cause's secondary symptoms into its evidence
            c = ev.by_id.get(cid)
            if c and c["status"] in ("fail", "error") and cid not in explained and say(c) not in evidence:
                evidence.append("also explains " + say(c))
            explained.add(cid)
        for line in f.evidence:
            explained.update(cid for cid in ev.by_id if line.startswith(cid + ":"))
        out.append(_diag(cause.id, f.confidence, evidence, f.location, f.fix, f.title))
        if getattr(f, "component", None):        # lm: the component the diagnosis is about
            out[-1]["component"] = f.component
    deviations, unreliable = [], []
    message: dict[int, object] = {}      # id(diagnosis) -> the exception message it stands for (not in the JSON)
    for c in result["checks"]:
        if c["id"] in explained or c["status"] not in ("fail", "error"):
            continue
        d = c.get("data") or {}
        if c["id"] in ev.unreliable:       # compares two passes of a random forward: folded below
            unreliable.append(c)
            continue
        comp, made = _component(c["id"]), len(out)
        if c["status"] == "error" and comp and ev.passed("shapes") and not d.get("harness_error") \
                and not d.get("timeout"):
            deviations.append(f"{comp}: {say(c)}")     # the model works: the component's interface differs
        elif d.get("harness_error"):
            out.append(_diag("grader-fault", 0.5, [say(c)]))
        elif c["status"] == "error" and not d.get("could_not_measure"):
            cid = "timeout" if d.get("timeout") else "forward-error"
            same = next((o for o in out if o["id"] == cid and message.get(id(o)) == d.get("message")), None)
            if same is not None:     # one exception met by several checks: one finding, the others listed
                same["evidence"].append("also " + say(c))
            else:
                out.append(_diag(cid, 0.6, [say(c)], c.get("location")))
                message[id(out[-1])] = d.get("message")
        else:
            u = _unexplained(c)
            same = next((o for o in out if o["id"] == "unexplained-failure" and u["location"] and o["location"]
                         and o["location"].get("line") == u["location"].get("line")), None)
            if same is not None:     # failures that start at the same op are one root, named once
                same["evidence"] += ["also " + e for e in u["evidence"]]
                same["confidence"] = max(same["confidence"], u["confidence"])
            else:
                out.append(u)
        if len(out) > made and d.get("component") and pack is not None and not pack.is_repository:
            out[-1]["component"] = str(d["component"])[:100]     # a pack's check names its component
        explained.add(c["id"])
    if unreliable:
        det = next((o for o in out if any(e.startswith(tuple(f"{r}:" for r in RANDOMNESS_EVIDENCE))
                                          for e in o["evidence"])), None)
        if det is not None:
            det["evidence"] += [f"also unreliable (the forward pass is random): {say(c)}" for c in unreliable]
    if deviations:
        out.append(_diag("contract-deviation", 0.3, deviations + [
            "the model's own forward pass runs: only the checks that call these components directly are skipped"]))
    for d in out:   # the catch-all's location is in the student's file
        if d["location"] and d["location"].get("file") is None:
            d["location"]["file"] = result.get("submission")
    out.sort(key=lambda d: -d["confidence"])       # stable: a rule's finding before a catch-all at a tie
    if packed:       # would the course's own checks have seen it (the pieces' replays of the course's calls)
        course.annotate(out, result["checks"])
    if assignment_of(ev.assignment).per_component and not packed:   # lm's order
        out.sort(key=lambda d: lm_order(d, ev))
    return out


def _integrity(result: dict) -> list[dict]:
    """Tampering and forbidden operations stay on the row even when the file did not load or lacks names."""
    from .causes import forbidden_operation, tampering
    ev = Evidence(result)
    out = []
    for rule in (tampering, forbidden_operation):
        f = rule.diagnose(ev)
        if f is not None:
            out.append(_diag(rule.CAUSE.id, f.confidence, f.evidence, f.location, f.fix, f.title))
    return out


def _script_failures(skipped: list, submission: str) -> list[dict]:
    """Skipped top-level code that fails when the file runs as a script: info, with its line (issue 27)."""
    from .script_run import failures
    return [_diag("script-fails", 0.9, [f"line {line}: {what}",
                                        "the checks do not run top-level code, so they were not affected"],
                  {"file": submission, "line": line}) for line, what in failures(skipped, submission)[:3]]
def _grader_lacks_allowed(base: dict) -> None:
    """A `missing-module` whose every module the assignment allows (harness/allowed.py) is the grader's
    environment: it becomes a grader fault with the install command, never a student's zero. It ranks where the
    environment ranks: after every problem the code's own checks measured, before the notes."""
    import re

    from .allowed import install_command, is_allowed
    d = next((d for d in base["diagnoses"] if d.get("id") == "missing-module"), None)
    if d is None:
        return
    mods = {str((c.get("data") or {}).get("missing_module") or "") for c in base["checks"]
            if (c.get("data") or {}).get("kind") == "missing-module"}
    mods |= set(re.findall(r"No module named '([^']+)'", " ".join(str(e) for e in d.get("evidence") or [])))
    mods.discard("")
    if not mods or not all(is_allowed(m, base["assignment"]) for m in mods):
        return
    names, cmd = ", ".join(sorted(mods)), "; ".join(sorted({install_command(m) for m in mods}))
    ev = [f"the code imports {names}, which the {base['assignment']} assignment allows, and the Python that runs "
          f"mtxdiag does not have it"] + list(d.get("evidence") or [])[:3]
    fault = _diag("grader-fault", 1.0, ev, d.get("location"), fix=environment_fix(cmd),
                  title="mtxdiag's Python lacks a package the assignment allows")
    rest = [x for x in base["diagnoses"] if x is not d]
    problems = [i for i, x in enumerate(rest) if x.get("severity") != "info"]
    at = problems[-1] + 1 if problems else 0   # the environment last: after the code's own problems (issue 47)
    base["diagnoses"] = rest[:at] + [fault] + rest[at:]
    base["error"] = {"kind": "grader-environment", "reason": f"the Python that runs mtxdiag lacks {names}, which "
                     f"the assignment allows ({cmd})", "phase": "load", "student_fault": False}
    base["verdict"] = "error"


def environment_fix(cmd: str, instructor: bool = False) -> str:
    """The fix of a package the assignment allows and mtxdiag's Python lacks: addressed to whoever ran the check
    (a student's own `check`), or to the instructor (`grade`, `gradescope`: for_instructor)."""
    if instructor:
        return f"Instructor: install it where mtxdiag runs (`{cmd}`) and grade again; the student's code is not at fault."
    return f"Install it in the Python that runs mtxdiag (`{cmd}`) and check again; your code is not at fault."


def for_instructor(result: dict) -> dict:
    """A result as a grading run reports it: a missing package's fix (environment_fix) addressed to the
    instructor, who runs the grader. In place; the result."""
    if (result.get("error") or {}).get("kind") != "grader-environment":
        return result
    for d in result.get("diagnoses") or []:
        fix = d.get("fix") if d.get("id") == "grader-fault" else None
        if isinstance(fix, str) and fix.startswith("Install it in the Python that runs mtxdiag (`"):
            d["fix"] = environment_fix(fix.split("`")[1], instructor=True)
    return result


def verdict(diagnoses: list[dict]) -> str:
    """problems when any diagnosis is a problem; findings of severity "info" alone leave a file clean."""
    return "problems" if any(d.get("severity", "problem") != "info" for d in diagnoses) else "clean"


LOAD_KIND_TO_CAUSE = {"syntax-error": "syntax-error", "definition-error": "definition-error",
                      "missing-module": "missing-module", "unreadable": "unreadable-file",
                      "exit-during-load": "exit-during-load", "timeout": "timeout", "missing-adapters": "missing-name"}


def build_result(outcome: ChildOutcome, submission: str, requested_assignment: str, source_text: str | None = None,
                 quick: bool = False) -> dict:
    """The final, validated result: the JSON a user, a report and a gradebook read (schema 1, written through
    protocol.Result: a key the type does not declare, or a missing one, is the engine's bug and raises)."""
    return Result.from_json(_build(outcome, submission, requested_assignment, quick), strict=True).to_json()


def _build(outcome: ChildOutcome, submission: str, requested_assignment: str, quick: bool) -> dict:
    base = {"schema": SCHEMA, "harness_version": __version__, "submission": submission,
            "assignment": requested_assignment if requested_assignment != "auto" else None,
            "quick": quick, "verdict": "error", "diagnoses": [], "checks": [], "skipped_code": [],
            "stdout": outcome.stdout[-100_000:], "stderr": outcome.stderr[-20_000:], "artifacts": {},
            "timings": {"total_s": round(outcome.seconds, 3)}, "error": None}
    if outcome.limits:          # which mechanism limited the run (isolation/enforce.py): the parent's own record
        base["limits"] = dict(outcome.limits)
    if outcome.payload is not None:
        try:
            p = validate_payload(outcome.payload)
        except InvalidResult as e:
            base["diagnoses"] = [_diag("grader-fault", 1.0, [f"invalid result from the child: {e}"])]
            base["error"] = {"kind": "invalid-result", "reason": str(e), "phase": None, "student_fault": False}
            return base
        size = len(json.dumps(p, indent=2))       # as the results file writes it (api.write_json_atomic)
        if size > RESULT_MB * 1_000_000:           # only the submission's code makes a result this large
            outcome = replace(outcome, payload=None, status="crashed", reason=(
                f"made a result of {size / 1e6:.1f} MB, over the {RESULT_MB} MB a check's result may take (a "
                "correct model's is well under 1 MB: the submission's code made it this large)"))
    if outcome.payload is None:
        reason = outcome.reason
        cause = {"timeout": "timeout", "memory": "memory-limit", "grader-fault": "grader-fault"}.get(
            outcome.status, "crashed")
        line = stack_line(outcome.stack, submission) if outcome.stack else None
        loc = {"file": submission, "line": line} if line else None
        ev = [f"the check {reason}"] + ([f"it was running line {line} of your file"] if line else [])
        base["diagnoses"] = [_diag(cause, 1.0, ev, loc)]
        base["error"] = {"kind": outcome.status, "reason": reason, "phase": outcome.phase,
                         "student_fault": outcome.status != "grader-fault"}
        return base
    base.update(checks=p["checks"], skipped_code=p["skipped_code"], artifacts=p["artifacts"],
                stdout=p["stdout"] + (outcome.stdout[-20_000:] if outcome.stdout.strip() else ""))
    base["timings"].update({k: round(v, 3) for k, v in p["timings"].items() if k != "total_s"})
    if p["coverage"]:          # check --repair only: which functions each probe ran (repair/verify.py reads it)
        base["coverage"] = p["coverage"]
    base["assignment"] = p["assignment"] or base["assignment"] or DEFAULT.name
    ref = reference_curves.load() if assignment_of(base["assignment"]).trains else None
    reference_curves.fill_expected(base["checks"], ref)   # the child never reads the reference's measurements
    load = p["load"] or {}
    if not load.get("ok"):
        kind = LOAD_KIND_TO_CAUSE.get(load.get("kind"), "definition-error")
        loc = load.get("location") if isinstance(load.get("location"), dict) else None
        msg = str(load.get("message", "the file could not be loaded"))
        ev = [msg] + ([f"line {loc.get('cell_line') or loc['line']}: {load.get('detail')}"] if loc and load.get("detail") else [])
        base["diagnoses"] = [_diag(kind, 1.0, ev, loc)] + _integrity(base)
        base["verdict"] = "problems"
        _grader_lacks_allowed(base)
        return base
    contract = next((c for c in p["checks"] if c["id"] == "contract"), None)
    if contract and contract["status"] == "fail":
        missing = (contract.get("measured") or {}).get("missing") or []
        hidden = next((s for s in base["skipped_code"] if any(f"class {n}" in str(s.get("code", ""))
                                                               or f"def {n}" in str(s.get("code", "")) for n in missing)),
                      None)
        loc = {"file": submission, "line": hidden["line"]} if hidden else None
        ev = [say(contract)] + ([f"{', '.join(missing)} is defined inside code that does not run at import "
                                 f"(line {hidden['line']}: {hidden['reason']}); move it to the top level"]
                                if hidden else [])
        base["diagnoses"] = [_diag("missing-name", 1.0, ev, loc)] + _integrity(base)
        base["verdict"] = "problems"
        return base
    base["diagnoses"] = diagnose(base) + _script_failures(base["skipped_code"], submission)
    base["verdict"] = verdict(base["diagnoses"])
    _grader_lacks_allowed(base)
    if assignment_of(base["assignment"]).trains and base["artifacts"].get("training"):
        if ref:  # the reference's own brief training, same steps and seed: the report draws both
            base["reference"] = {"training": ref.get("training"), "decode_accuracy": ref.get("decode_accuracy"),
                                 "cross_attn_pattern": ref.get("cross_attn_pattern")}
    return base
