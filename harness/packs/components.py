"""A pack's result per component (torch-free): what the rubric, Gradescope and the report's checklist read.

A component is one binding of the result's edition (the contract check's data says which edition and which
pieces are there). Its checks are those whose id starts with "<component>." (the role probes') and the
diagnoses that name it (`component`).

    status  pass             one of its checks passed and none failed, and no problem diagnosis names it
            fail             one of its checks failed or raised, or a problem diagnosis names it
            not-implemented  the piece is still the handout's stub
            absent           the submission does not define it (its module or its name)
            not-checked      nothing measured it (the file did not load, no probe covers its role)
"""
from __future__ import annotations

from .api import Pack

COMPONENT_STATES = ("pass", "fail", "not-implemented", "absent", "not-checked")


def edition_of(result: dict) -> str | None:
    contract = next((c for c in result.get("checks") or [] if isinstance(c, dict) and c.get("id") == "contract"),
                    None)
    data = (contract or {}).get("data") if isinstance((contract or {}).get("data"), dict) else {}
    e = (data or {}).get("edition")
    return e if isinstance(e, str) else None


def rows(result: dict, pack: Pack) -> dict[str, dict]:
    """{component: {status, target, points, cause, confidence, evidence, location, note}} in the pack's order."""
    checks = [c for c in result.get("checks") or [] if isinstance(c, dict)]
    diags = [d for d in result.get("diagnoses") or [] if isinstance(d, dict)]
    contract = next((c for c in checks if c.get("id") == "contract"), None)
    data = contract.get("data") if contract and isinstance(contract.get("data"), dict) else {}
    told = data.get("components") if isinstance(data.get("components"), dict) else {}
    out: dict[str, dict] = {}
    bindings = pack.bindings_for(edition_of(result))
    names = sorted((b.component for b in bindings), key=len, reverse=True)
    # a check is its longest matching component's ("Model.sample.shape" is Model.sample's, not Model's)
    owner = {id(c): next((n for n in names if str(c.get("id", "")).startswith(n + ".")), None) for c in checks}
    for b in bindings:
        own = [c for c in checks if owner[id(c)] == b.component]
        diag = next((d for d in diags if d.get("component") == b.component and d.get("severity", "problem") != "info"),
                    None)
        said = told.get(b.component) if isinstance(told.get(b.component), dict) else {}
        if said.get("status") in ("absent", "not-implemented"):
            status, note = said["status"], str(said.get("why") or "")
        elif diag is not None or any(c.get("status") in ("fail", "error") for c in own):
            status = "fail"
            bad = next((c for c in own if c.get("status") in ("fail", "error")), None)
            note = str((bad or {}).get("detail") or (diag or {}).get("title") or "")
        elif any(c.get("status") == "pass" for c in own):
            status, note = "pass", f"{sum(c.get('status') == 'pass' for c in own)} check(s) passed"
        else:
            status = "not-checked"
            note = next((str(c.get("detail")) for c in own if c.get("detail")), "no check measured it")
        out[b.component] = {"status": status, "target": b.target, "points": b.points, "note": note[:300],
                            "cause": diag.get("id") if diag else None,
                            "confidence": diag.get("confidence") if diag else None,
                            "evidence": [str(e) for e in (diag.get("evidence") or [])[:4]] if diag else [],
                            "location": diag.get("location") if diag else None}
    return out
